// Speedup over iterations: each verified candidate, and the best so far (uPlot).
import uPlot from 'uplot';

let chart = null;

export function renderPlot(root, data) {
  const p = data.progress || [];
  const xs = p.map((r) => r.iteration + 1);
  const series = [xs, p.map((r) => r.best), p.map((r) => r.speedup)];
  if (chart) { chart.destroy(); chart = null; }
  root.replaceChildren();
  chart = new uPlot({
    width: Math.max(320, root.clientWidth - 16 || 420),
    height: 240,
    title: 'speedup over eager, by iteration',
    scales: { x: { time: false } },
    axes: [{ label: 'iteration' }, { label: '×eager' }],
    series: [
      {},
      { label: 'best', stroke: '#1b7f3b', width: 2 },
      { label: 'candidate', stroke: '#4063d8', width: 0, points: { show: true, size: 6 } },
    ],
  }, series, root);
}
