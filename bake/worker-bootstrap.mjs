// Worker threads do not inherit the TypeScript loader of the main thread: register tsx here, then
// load the TypeScript entry named by the pool (it serves jobs when loaded).
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
