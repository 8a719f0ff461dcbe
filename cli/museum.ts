/**
 * `museum`: the one CLI (decisions: names fixed for operators and checks). Each area contributes
 * its commands; this file only composes them and maps failures to exit codes
 * (0 success, 1 failure, 2 usage).
 */
import { Command, CommanderError } from 'commander';
import { bakeCommand } from '../bake/cli.ts';
import { loadDotEnv } from '../common/env.ts';
import { printable } from '../common/terminal.ts';
import { keysCommand, serveCommand, soulsCommand } from '../server/cli.ts';

export class CliFailure extends Error {}

export function buildProgram(): Command {
  const program = new Command('museum')
    .description('Museum Art Data: bake room artifacts and serve the /v1 API')
    .version('1.0.0')
    .showHelpAfterError()
    .exitOverride();
  program.addCommand(bakeCommand());
  program.addCommand(serveCommand());
  program.addCommand(keysCommand());
  program.addCommand(soulsCommand());
  // Sub-commands inherit exitOverride so usage errors surface as CommanderError (exit 2).
  const propagate = (cmd: Command) => {
    cmd.exitOverride();
    cmd.commands.forEach(propagate);
  };
  propagate(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    loadDotEnv(process.cwd());
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with exit code 0; usage errors with 2.
      process.exitCode = err.exitCode === 0 ? 0 : 2;
      return;
    }
    // Operators get one line, not a stack trace.
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`museum: ${printable(message.split('\n')[0]!)}\n`);
    process.exitCode = 1;
  }
}
