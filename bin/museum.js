#!/usr/bin/env node
// Entry point for `npx museum`: registers tsx so the TypeScript sources run without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../cli/museum.ts');
await main(process.argv);
