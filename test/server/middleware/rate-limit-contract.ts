/** What every rate-limit store does, wherever the windows live (memory, Redis). */
import { expect } from 'vitest';
import type { RateLimitStore } from '../../../server/middleware/rate-limit.ts';

/** An exact sliding window, driven with explicit clocks: a hit frees up exactly 60 s after it was made. */
export async function expectExactSlidingWindow(store: RateLimitStore, subject = 'k'): Promise<void> {
  const hit = (at: number) => Promise.resolve(store.hit(subject, 3, 60_000, at));
  const t0 = 1_000_000;
  // resetMs: until the oldest hit counted leaves the window (a place frees up).
  for (let i = 0; i < 3; i++) expect(await hit(t0 + i * 1000)).toEqual({ allowed: true, remaining: 2 - i, resetMs: 60_000 - i * 1000 });
  expect(await hit(t0 + 59_999)).toEqual({ allowed: false, remaining: 0, resetMs: 1 });
  // The first hit (t0) leaves the window at t0 + 60 s; the second (t0 + 1 s) is still in it.
  expect(await hit(t0 + 60_000)).toEqual({ allowed: true, remaining: 0, resetMs: 1_000 });
  expect(await hit(t0 + 60_500)).toEqual({ allowed: false, remaining: 0, resetMs: 500 });
  expect(await hit(t0 + 61_000)).toEqual({ allowed: true, remaining: 0, resetMs: 1_000 });
  // Refused hits are not recorded: after a quiet minute the whole budget is back.
  expect(await hit(t0 + 200_000)).toEqual({ allowed: true, remaining: 2, resetMs: 60_000 });
}
