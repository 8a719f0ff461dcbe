/** The bake's worker-thread entry: a pool worker (see workers.ts) that bakes the rooms it is sent. */
import { startRoomWorker } from './room.ts';

startRoomWorker();
