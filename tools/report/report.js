// The page script of `shimmer report` (tools/report.c embeds it in every
// report): draws the charts from the data shimmer wrote into the page
// (<script id="shimmer-data">) with Chart.js, inlined before this script.
// Nothing is fetched: the page works offline, and its Content Security
// Policy forbids any request.  Every chart is a <canvas data-chart=NAME>;
// once drawn it gets data-drawn="1" (the report test checks it).
(function () {
	'use strict';
	var data = JSON.parse(document.getElementById('shimmer-data').textContent);
	var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b',
		       '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

	function color(i, alpha) {
		var c = palette[i % palette.length];
		if (alpha === undefined)
			return c;
		var n = parseInt(c.slice(1), 16);
		return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + alpha + ')';
	}

	function units(v, names, step) {
		var i = 0;
		while (Math.abs(v) >= step && i < names.length - 1) {
			v /= step;
			i++;
		}
		return (Math.abs(v) >= 100 || i === 0 ? v.toFixed(0) : v.toFixed(v >= 10 ? 1 : 2)) +
			' ' + names[i];
	}

	function bytes(v) {
		return units(v, ['B', 'KiB', 'MiB', 'GiB', 'TiB'], 1024);
	}

	function duration(ns) {
		return units(ns, ['ns', 'us', 'ms', 's'], 1000);
	}

	function xy(points) {
		return points.map(function (p) {
			return { x: p[0], y: p[1] };
		});
	}

	function base(xTitle, yTitle, yFormat) {
		return {
			animation: false,
			responsive: true,
			maintainAspectRatio: false,
			parsing: false,
			normalized: true,
			interaction: { mode: 'nearest', intersect: false },
			plugins: {
				legend: { position: 'bottom', labels: { boxWidth: 12 } },
				tooltip: {
					callbacks: {
						label: function (c) {
							return c.dataset.label + ': ' + (yFormat ? yFormat(c.parsed.y) : c.parsed.y);
						}
					}
				}
			},
			scales: {
				x: { type: 'linear', title: { display: true, text: xTitle } },
				y: {
					beginAtZero: true,
					title: { display: true, text: yTitle },
					ticks: yFormat ? { callback: function (v) { return yFormat(v); } } : {}
				}
			}
		};
	}

	var makers = {
		steps: function () {
			return {
				type: 'line',
				data: {
					datasets: data.steps.map(function (s, i) {
						return { label: s.label, data: xy(s.points), borderColor: color(i),
							 backgroundColor: color(i, 0.2), pointRadius: 0, borderWidth: 1 };
					})
				},
				options: base('step', 'step time', duration)
			};
		},
		gpu: function () {
			var o = base('time since the first process started (s)', 'busy', function (v) {
				return (100 * v).toFixed(0) + '%';
			});
			o.scales.y.max = 1;
			return {
				type: 'line',
				data: {
					datasets: data.gpu.map(function (s, i) {
						return { label: s.label, data: xy(s.points), borderColor: color(i),
							 backgroundColor: color(i, 0.15), fill: 'origin', pointRadius: 0,
							 borderWidth: 1, spanGaps: false };
					})
				},
				options: o
			};
		},
		memory: function () {
			var sets = [];
			data.memory.forEach(function (m, i) {
				sets.push({ label: m.label, data: xy(m.points), borderColor: color(i),
					    backgroundColor: color(i, 0.1), pointRadius: 0, borderWidth: 1,
					    stepped: 'before' });
				if (m.peak)
					sets.push({ label: m.label + ' peak', data: xy([m.peak]), type: 'scatter',
						    borderColor: color(i), backgroundColor: color(i),
						    pointRadius: 6, pointStyle: 'triangle' });
				(m.fits || []).forEach(function (f) {
					sets.push({ label: 'fit: ' + f.label, data: xy(f.points), borderColor: color(i),
						    borderDash: [6, 4], pointRadius: 0, borderWidth: 2 });
				});
			});
			return { type: 'line', data: { datasets: sets },
				 options: base('time since the first process started (s)', 'live bytes', bytes) };
		}
	};

	function bars(list, labelKey, valueKey, xTitle) {
		var o = base(xTitle, '', duration);
		o.indexAxis = 'y';
		o.parsing = true;
		o.scales = {
			x: { beginAtZero: true, title: { display: true, text: xTitle },
			     ticks: { callback: function (v) { return duration(v); } } },
			y: { ticks: { autoSkip: false } }
		};
		o.plugins.legend = { display: false };
		o.plugins.tooltip.callbacks.label = function (c) {
			return duration(c.parsed.x);
		};
		o.plugins.tooltip.callbacks.title = function (items) {
			return list[items[0].dataIndex].full || list[items[0].dataIndex][labelKey];
		};
		return {
			type: 'bar',
			data: {
				labels: list.map(function (k) { return k[labelKey]; }),
				datasets: [{ data: list.map(function (k) { return k[valueKey]; }),
					     backgroundColor: list.map(function (k, i) { return color(i, 0.7); }) }]
			},
			options: o
		};
	}

	makers.sizes = function () {
		var z = data.sizes;
		var o = base('size', 'share of the allocations', function (v) {
			return (100 * v).toFixed(v > 0 && v < 0.1 ? 1 : 0) + '%';
		});
		o.parsing = true;
		o.scales.x = { type: 'category', title: { display: true, text: 'size' } };
		o.interaction = { mode: 'index', intersect: false };
		o.plugins.tooltip.callbacks.label = function (c) {
			var s = z.sets[c.datasetIndex], i = c.dataIndex, m = s.estimated ? '~' : '';
			return s.label + ': ' + m + Math.round(s.count[i]) + ' allocations (' + m +
				(100 * s.share[i]).toFixed(1) + '%), ' + m + bytes(s.bytes[i]);
		};
		return {
			type: 'bar',
			data: {
				labels: z.labels,
				datasets: z.sets.map(function (s, i) {
					return { label: (s.estimated ? '~' : '') + s.label, data: s.share,
						 backgroundColor: color(i, 0.7) };
				})
			},
			options: o
		};
	};
	makers.kernels = function () {
		return bars(data.kernels, 'name', 'ns', 'GPU time');
	};
	makers.sites = function () {
		return bars(data.sites, 'site', 'ns', 'GPU time of the kernels launched there');
	};

	document.querySelectorAll('canvas[data-chart]').forEach(function (canvas) {
		var name = canvas.getAttribute('data-chart');
		var chart = new Chart(canvas, makers[name]());
		if (chart.data.datasets.some(function (d) { return d.data.length > 0; }))
			canvas.setAttribute('data-drawn', '1');
	});
})();
