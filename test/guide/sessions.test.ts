/** The in-memory guide session store keeps its bounds: turns, sessions (LRU), follow-ups, idle time. */
import { describe, expect, it } from 'vitest';
import { MemorySessionStore } from '../../server/guide/sessions.ts';

const clock = () => {
  let t = 1_000_000;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

describe('MemorySessionStore', () => {
  it('keeps only the most recent turns of a session', async () => {
    const store = new MemorySessionStore({ maxTurns: 4 });
    for (let i = 0; i < 10; i++) await store.addTurns('a', [{ role: i % 2 ? 'assistant' : 'user', content: `t${i}` }]);
    expect((await store.turns('a')).map((t) => t.content)).toEqual(['t6', 't7', 't8', 't9']);
    expect(await store.turns('other')).toEqual([]);
    store.close();
  });

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

  it('delivers follow-ups once, in order, bounded, and reports pending work', async () => {
    const store = new MemorySessionStore({ maxFollowups: 2 });
    await store.beginFollowup('s');
    expect(await store.takeFollowup('s')).toEqual({ followup: null, pending: true });
    await store.beginFollowup('s');
    await store.beginFollowup('s');
    for (const text of ['one', 'two', 'three']) await store.putFollowup('s', { text, sources: [], fallback: false });
    expect(await store.takeFollowup('s')).toEqual({ followup: { text: 'two', sources: [], fallback: false }, pending: false });
    expect((await store.takeFollowup('s')).followup!.text).toBe('three');
    expect(await store.takeFollowup('s')).toEqual({ followup: null, pending: false });
    expect(await store.takeFollowup('never')).toEqual({ followup: null, pending: false });
    store.close();
  });
});
