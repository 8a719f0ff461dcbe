/**
 * Debian's Chromium (scripts/system-deps.sh) through playwright-core, for tests and benchmarks of
 * pages: launch flags for a root sandbox without network or GPU (WebGL through SwiftShader), and a
 * page that records what went wrong (console errors, page errors, failed requests, HTTP errors).
 */
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Browser, chromium, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
export const HAS_CHROMIUM = existsSync(CHROMIUM);
const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  // WebGL on the CPU: SwiftShader is no longer a silent fallback, so ask for it.
  '--use-angle=swiftshader',
  '--enable-unsafe-swiftshader',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const launchChromium = (): Promise<Browser> => chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, headless: true });

export interface WatchedPage {
  page: Page;
  /** Console errors and uncaught page errors. */
  errors: string[];
  /** Requests that failed outright, and responses with status >= 400, as `STATUS url`. */
  failed: string[];
}

export async function watchedPage(browser: Browser, viewport = { width: 1280, height: 800 }): Promise<WatchedPage> {
  const page = await browser.newPage({ viewport });
  const errors: string[] = [];
  const failed: string[] = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('requestfailed', (r) => failed.push(`${r.failure()?.errorText ?? 'failed'} ${r.url()}`));
  page.on('response', (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
  return { page, errors, failed };
}

/**
 * Poll an expression in the page until it is truthy. (page.waitForFunction evaluates through
 * `eval`, which the pages' CSP forbids; page.evaluate of a string does not.)
 */
export async function pageUntil<T>(page: Page, expression: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = (await page.evaluate(expression)) as T;
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`page never satisfied: ${expression}`);
    await sleep(50);
  }
}
