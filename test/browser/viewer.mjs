// viewer.mjs: opens a file in a real viewer, speedscope, inside headless
// Chromium (Debian's /usr/bin/chromium, driven by playwright-core), and
// reports what the viewer shows, so tests check shimmer's outputs against a
// real consumer rather than shimmer's own parser.
//
//   node test/browser/viewer.mjs speedscope FILE
//
// speedscope imports its own format, collapsed ("folded") stacks and Chrome
// Trace Event Format JSON.  Prints one JSON object on stdout:
//   {"title": ..., "profiles": [names, in the viewer's order], "errors": [...]}
// errors: uncaught page errors, console errors and alert dialogs (speedscope
// reports a file it cannot import with an alert).  Exit status 0 when the
// file loaded with no error and at least one profile, 1 otherwise, 2 on a
// usage error.  CHROMIUM=path overrides the browser.
import { chromium } from 'playwright-core';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [viewer, file] = process.argv.slice(2);
if (viewer !== 'speedscope' || !file) {
	console.error('usage: node test/browser/viewer.mjs speedscope FILE');
	process.exit(2);
}
const app = path.join(here, 'node_modules/speedscope/dist/release/index.html');
if (!existsSync(app)) {
	console.error(`viewer.mjs: ${app} missing: run .ci/install-deps (npm ci in test/browser)`);
	process.exit(2);
}

// A fresh profile directory, nothing fetched from the network, no sandbox
// (root in CI), no GPU.
const profile = mkdtempSync(path.join(tmpdir(), 'shimmer-chromium-'));
const browser = await chromium.launchPersistentContext(profile, {
	executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
	headless: true,
	args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
	       '--disable-component-update', '--disable-sync'],
});
const out = { title: '', profiles: [], errors: [] };
try {
	const page = browser.pages()[0] || await browser.newPage();
	page.on('pageerror', (e) => out.errors.push(`page error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') out.errors.push(`console: ${m.text()}`); });
	page.on('dialog', async (d) => { out.errors.push(`dialog: ${d.message()}`); await d.dismiss(); });
	await page.goto(pathToFileURL(app).href);
	await page.setInputFiles('input[type=file]', path.resolve(file));
	// Loaded: the title names the file, or an error came.
	const deadline = Date.now() + 60000;
	while (!(await page.title()).endsWith(' - speedscope') && !out.errors.length &&
	       Date.now() < deadline)
		await page.waitForTimeout(100);
	out.title = await page.title();
	// The toolbar names the profile shown, "NAME (i/N)" when there are
	// several; 'n' shows the next one.
	const current = async () => page.evaluate(() => {
		const t = document.body.innerText.split('\n');
		return t.length > 1 ? t[1] : '';
	});
	let name = await current(), m = /^(.*) \((\d+)\/(\d+)\)$/.exec(name);
	if (!m) {
		if (!out.errors.length && out.title.endsWith(' - speedscope'))
			out.profiles.push(name);
	} else {
		const n = Number(m[3]);
		for (let i = 0; i < n; i++) {
			out.profiles.push(m[1]);
			if (i + 1 === n)
				break;
			await page.keyboard.press('n');
			await page.waitForTimeout(50);
			name = await current();
			m = /^(.*) \((\d+)\/(\d+)\)$/.exec(name);
			if (!m) {
				out.errors.push(`profile ${i + 2} of ${n}: toolbar reads '${name}'`);
				break;
			}
		}
	}
} catch (e) {
	out.errors.push(`harness: ${e.message}`);
} finally {
	await browser.close();
	rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
process.exit(!out.errors.length && out.profiles.length ? 0 : 1);
