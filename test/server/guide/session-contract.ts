/** What every guide session store does, whatever holds the sessions (memory, Redis). */
import { expect, it } from 'vitest';
import type { GuideSessionStore } from '../../../server/guide/sessions.ts';

export function sessionStoreContract(make: (options: { maxTurns?: number; maxFollowups?: number }) => GuideSessionStore): void {
  it('keeps only the most recent turns of a session', async () => {
    const store = make({ maxTurns: 4 });
    for (let i = 0; i < 10; i++) await store.addTurns('a', [{ role: i % 2 ? 'assistant' : 'user', content: `t${i}` }]);
    expect((await store.turns('a')).map((t) => t.content)).toEqual(['t6', 't7', 't8', 't9']);
    expect(await store.turns('other')).toEqual([]);
    await store.close();
  });

  it('delivers follow-ups once, in order, bounded, and reports pending work', async () => {
    const store = make({ maxFollowups: 2 });
    await store.beginFollowup('s');
    expect(await store.takeFollowup('s')).toEqual({ followup: null, pending: true });
    await store.beginFollowup('s');
    await store.beginFollowup('s');
    for (const text of ['one', 'two', 'three']) await store.putFollowup('s', { text, sources: [], fallback: false });
    expect(await store.takeFollowup('s')).toEqual({ followup: { text: 'two', sources: [], fallback: false }, pending: false });
    expect((await store.takeFollowup('s')).followup!.text).toBe('three');
    expect(await store.takeFollowup('s')).toEqual({ followup: null, pending: false });
    expect(await store.takeFollowup('never')).toEqual({ followup: null, pending: false });
    // A follow-up without a matching begin never drives the count below zero.
    await store.putFollowup('s', { text: 'extra', sources: [], fallback: true });
    expect(await store.takeFollowup('s')).toEqual({ followup: { text: 'extra', sources: [], fallback: true }, pending: false });
    await store.close();
  });
}
