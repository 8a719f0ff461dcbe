// A pool worker process running from source has no TypeScript loader of its own: register tsx here,
// then load the TypeScript entry named by the pool (its first argument; it serves jobs when loaded).
import { register } from 'tsx/esm/api';

register();
await import(process.argv[2]);
