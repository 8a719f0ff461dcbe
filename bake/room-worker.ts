/** The bake's pool worker entry: a worker process (see workers.ts) that bakes the rooms it is sent. */
import { startRoomWorker, useImageThreads } from './room.ts';
import { poolWorkerData } from './workers.ts';

const { imageThreads } = poolWorkerData<{ imageThreads: number }>();
if (imageThreads) useImageThreads(imageThreads);
startRoomWorker();
