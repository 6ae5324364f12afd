// report.mjs: opens a `shimmer report` HTML file in headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core) and reports what
// a person would see, so the report test checks the page in a real browser:
//
//   node test/browser/report.mjs FILE [SCREENSHOT.png]
//
// Prints one JSON object on stdout:
//   {"title": ..., "sections": [ids present], "charts": {name: {drawn, datasets,
//    points, painted}}, "flames": {id: boxes}, "findings": n, "ranks_rows": n,
//    "requests": [...], "errors": [...]}
// charts: every <canvas data-chart>, whether Chart.js drew it (its chart
// object, its datasets and their points) and whether its pixels are painted
// (not all blank); requests: every request the page made besides loading the
// file itself (a self-contained report makes none); errors: page errors and
// console errors.  A full-page screenshot is written when asked for.  Exit
// status 0 when the page loaded, 1 on a browser failure, 2 on a usage error.
// CHROMIUM=path overrides the browser.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [file, shot] = process.argv.slice(2);
if (!file) {
	console.error('usage: node test/browser/report.mjs FILE [SCREENSHOT.png]');
	process.exit(2);
}
const url = pathToFileURL(path.resolve(file)).href;
const profile = mkdtempSync(path.join(tmpdir(), 'shimmer-chromium-'));
const browser = await chromium.launchPersistentContext(profile, {
	executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
	headless: true,
	viewport: { width: 1366, height: 900 },
	args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
	       '--disable-component-update', '--disable-sync'],
});
const out = { title: '', sections: [], charts: {}, flames: {}, findings: 0, ranks_rows: 0,
	      requests: [], errors: [] };
try {
	const page = browser.pages()[0] || await browser.newPage();
	page.on('pageerror', (e) => out.errors.push(`page error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') out.errors.push(`console: ${m.text()}`); });
	page.on('request', (r) => { if (r.url() !== url) out.requests.push(r.url()); });
	await page.goto(url, { waitUntil: 'load' });
	await page.waitForTimeout(500);
	out.title = await page.title();
	Object.assign(out, await page.evaluate(() => {
		const res = { sections: [], charts: {}, flames: {}, findings: 0 };
		document.querySelectorAll('section[id]').forEach((s) => res.sections.push(s.id));
		document.querySelectorAll('canvas[data-chart]').forEach((c) => {
			const chart = window.Chart && window.Chart.getChart(c);
			let painted = false;
			try {
				const ctx = c.getContext('2d');
				const px = ctx.getImageData(0, 0, c.width, c.height).data;
				for (let i = 3; i < px.length; i += 4 * 7)
					if (px[i] !== 0) { painted = true; break; }
			} catch (e) { painted = false; }
			res.charts[c.getAttribute('data-chart')] = {
				drawn: c.getAttribute('data-drawn') === '1' && !!chart,
				datasets: chart ? chart.data.datasets.length : 0,
				points: chart ? chart.data.datasets.reduce((n, d) => n + d.data.length, 0) : 0,
				painted,
			};
		});
		document.querySelectorAll('.flame svg').forEach((s) => {
			res.flames[s.id] = s.querySelectorAll('rect').length;
		});
		res.findings = document.querySelectorAll('.finding').length;
		res.ranks_rows = document.querySelectorAll('#ranks table tr').length;
		return res;
	}));
	if (shot)
		await page.screenshot({ path: shot, fullPage: true });
} catch (e) {
	out.errors.push(`browser: ${e.message}`);
	console.log(JSON.stringify(out));
	await browser.close();
	rmSync(profile, { recursive: true, force: true });
	process.exit(1);
}
await browser.close();
rmSync(profile, { recursive: true, force: true });
console.log(JSON.stringify(out));
