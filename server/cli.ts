/** `museum serve`, `museum keys …`, `museum souls verify`. */
import { Command } from 'commander';

export function serveCommand(): Command {
  return new Command('serve').description('Serve the baked artifacts and the /v1 API');
}

export function keysCommand(): Command {
  return new Command('keys').description('Manage API keys in STATE_DB');
}

export function soulsCommand(): Command {
  return new Command('souls').description('Soul (signed identity document) tools');
}
