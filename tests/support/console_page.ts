/**
 * The manager's web console in a test's Chromium (browser.ts): open it, log in through its form,
 * and read what the page shows.
 */
import assert from "node:assert/strict";
import type { Page } from "playwright-core";
import type { TestBrowser } from "./browser.ts";

/** Generous bounds on waiting for the page: a slow CI machine is not a failure. */
export const PAGE_WAIT_MS = 60_000;

/** Where the console is served, and the browser that opens it. */
export interface ConsoleAt {
  url: string;
  browser: TestBrowser;
}

/** Opens the console in a new browser context: the login form, as /console redirects to it. */
export async function openConsole(env: ConsoleAt): Promise<Page> {
  const context = await env.browser.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(PAGE_WAIT_MS);
  const response = await page.goto(`${env.url}/console`);
  assert.equal(response?.status(), 200);
  assert.equal(new URL(page.url()).pathname, "/console/");
  return page;
}

/** Opens the console, logs in with the token through the form, and waits until it follows the feed. */
export async function logIn(env: ConsoleAt, token: string): Promise<Page> {
  const page = await openConsole(env);
  await submitToken(page, token);
  return page;
}

export async function submitToken(page: Page, token: string): Promise<void> {
  await page.locator("#login").waitFor({ state: "visible" });
  await page.fill("#token", token);
  await page.click("#login button[type=submit]");
  await page.locator("#live[data-state=live]").waitFor();
}

/** The texts of the elements a selector finds. */
export function texts(page: Page, selector: string): Promise<string[]> {
  return page.locator(selector).allTextContents();
}

/** An attribute of every element a selector finds, in page order. */
export function attrs(page: Page, selector: string, name: string): Promise<(string | null)[]> {
  return page.locator(selector).evaluateAll(
    (els, name) => els.map((e) => e.getAttribute(name)),
    name,
  );
}
