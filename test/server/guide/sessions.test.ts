/** The in-memory guide session store: the store contract, and its own bounds (sessions by LRU, idle time). */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { MemorySessionStore } from '../../../server/guide/sessions.ts';
import { sessionStoreContract } from './session-contract.ts';

const clock = () => {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

describe('MemorySessionStore', () => {
  sessionStoreContract((options) => new MemorySessionStore(options));

  it('evicts the least recently used session beyond its capacity', async () => {
    const store = new MemorySessionStore({ maxSessions: 3 });
    for (const key of ['a', 'b', 'c']) await store.addTurns(key, [{ role: 'user', content: key }]);
    await store.turns('a'); // a is now the most recently used
    await store.addTurns('d', [{ role: 'user', content: 'd' }]);
    expect(store.size).toBe(3);
    expect(await store.turns('b')).toEqual([]);
    expect((await store.turns('a'))[0]!.content).toBe('a');
    store.close();
  });

  it('forgets idle sessions', async () => {
    const c = clock();
    const store = new MemorySessionStore({ idleMs: 1_000, now: c.now });
    await store.addTurns('a', [{ role: 'user', content: 'hello' }]);
    c.advance(999);
    expect(await store.turns('a')).toHaveLength(1);
    c.advance(1_001);
    expect(await store.turns('a')).toEqual([]);
    store.close();
  });

  it('sweeps idle sessions out of memory, wherever they stand in use order', async () => {
    const c = clock();
    const store = new MemorySessionStore({ idleMs: 40, now: c.now });
    const keys = Array.from({ length: 8 }, (_, i) => `s${i}`);
    for (const key of keys) await store.addTurns(key, [{ role: 'user', content: key }]);
    c.advance(30);
    // s6 is used again: its idle time starts over, the others' does not.
    await store.turns('s6');
    c.advance(20);
    await sleep(120); // the sweep runs every idleMs
    expect(store.size).toBe(1);
    expect((await store.turns('s6'))[0]!.content).toBe('s6');
    store.close();
  });
});
