// Worker threads do not inherit the TypeScript loader of the main thread: register tsx here, then
// load the TypeScript module named by the pool and call its start function.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
const module = await import(workerData.entry);
await module[workerData.start]();
