/**
 * /docs "Try it out" in Chromium from an origin the server was not configured with (PUBLIC_URL is
 * http://museum.test; the page is opened on 127.0.0.1): the document's relative server makes
 * swagger-ui call the origin the page came from, which the page's CSP allows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HAS_CHROMIUM, launchChromium, watchedPage } from '../helpers/chromium.ts';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  await publishFixtureBake(server.dataDir);
  await server.services.content.reload();
});
afterAll(() => server?.close());

describe.skipIf(!HAS_CHROMIUM)('/docs', () => {
  it('"Try it out" answers from the origin the page was opened on', async () => {
    const browser = await launchChromium();
    try {
      const { page, errors, failed } = await watchedPage(browser);
      await page.goto(`${server.url}/docs`);
      const operation = page.locator('#operations-rooms-getRoomSlots');
      await operation.locator('.opblock-summary').click();
      await operation.getByRole('button', { name: 'Try it out' }).click();
      await operation.locator('input[placeholder="id"]').fill('1');
      const answered = page.waitForResponse((res) => res.url() === `${server.url}/v1/rooms/1/slots`);
      await operation.getByRole('button', { name: 'Execute' }).click();
      expect((await answered).status()).toBe(200);
      await expect.poll(() => operation.locator('.live-responses-table tbody .response-col_status').first().textContent()).toContain('200');
      expect(errors).toEqual([]);
      expect(failed).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 60_000);
});
