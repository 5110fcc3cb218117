import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { ROOT_KEY } from "../helpers/harness.js";

// What every page of the dashboard and the portal is held to in the browser tests: no WCAG 2.1 A/AA violation that
// axe-core finds, nothing wider than the window, and a screenshot kept as a test artefact.

/** Screenshots of each page at each size go here (git-ignored), for a person to look at after a run. */
export const SCREENSHOTS = join(process.cwd(), "test-results", "pages");

/** The window sizes every page is checked at: a laptop, and a phone held upright. */
export const VIEWPORTS = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
] as const;

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * axe-core's WCAG 2.0/2.1 A and AA rules over the page as it is now. The script is evaluated through the DevTools
 * protocol (page.evaluate), which the pages' CSP (no inline scripts) does not govern, so the pages keep their CSP.
 */
export async function axeViolations(page: Page): Promise<Violation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = (await page.evaluate(`axe
    .run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] } })
    .then((results) => results.violations)`)) as { id: string; impact: string | null; help: string; nodes: { target: unknown[] }[] }[];
  return violations.map((violation) => ({
    id: violation.id,
    impact: violation.impact,
    help: violation.help,
    targets: violation.nodes.map((node) => String(node.target)),
  }));
}

/** How far the page is wider than the window, in CSS pixels (0: it fits; a wide table scrolls inside its card). */
export function overflowX(page: Page): Promise<number> {
  return page.evaluate("Math.max(0, document.documentElement.scrollWidth - window.innerWidth)");
}

/** A full-page screenshot named `<name>-<width>x<height>.png`; its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const size = page.viewportSize();
  const path = join(SCREENSHOTS, `${name}-${size?.width}x${size?.height}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Signs in to the dashboard at `origin` with the harness's root key and waits for the APIs page. */
export async function signIn(page: Page, origin: string, rootKey = ROOT_KEY): Promise<void> {
  await page.goto(`${origin}/dashboard/`);
  await page.getByLabel("Root key").fill(rootKey);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "APIs", exact: true }).waitFor();
}
