import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Tests start real servers, Chromium and bakes; give slow CI machines room.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One test file per core (vitest's default for a run leaves one core idle: one file at a time on 2 cores).
    maxWorkers: availableParallelism(),
    // A temp dir per run, removed at its end (test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // `gc()` for the tests that prove timeouts fire whatever the garbage collector does
    // (test/server/upstream/library-hostile.test.ts); exposing it changes nothing else.
    execArgv: ['--expose-gc'],
  },
});
