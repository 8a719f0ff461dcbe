/** `museum bake …` commands. */
import { Command } from 'commander';

export function bakeCommand(): Command {
  return new Command('bake').description('Bake room artifacts (optimized GLBs, slot anchors, thumbnails)');
}
