// The LLM ledger: per target, each model-proposed node's requests and tokens
// (from the reply cache), with the cost when forge.yaml sets prices.
import { el } from './api.js';

export function renderLedger(root, data) {
  root.replaceChildren(el('h2', {}, 'LLM ledger'));
  root.append(el('p', {}, `${data.requests} requests, ${data.input_tokens} input tokens, ` +
    `${data.output_tokens} output tokens` + (data.cost_usd === null ? '' : `, $${data.cost_usd.toFixed(4)}`)));
  if (!data.targets.length) { root.append(el('p', { class: 'muted' }, 'no model-proposed kernels yet')); return; }
  for (const t of data.targets)
    root.append(el('h3', {}, t.target), el('table', { class: 'ledger' },
      el('tr', {}, ['node', 'what', 'status', 'requests', 'in', 'out'].map((h) => el('th', {}, h))),
      t.nodes.map((r) => el('tr', {}, el('td', {}, `#${r.node}`), el('td', {}, r.what),
        el('td', {}, el('span', { class: `pill status-${r.status}` }, r.status)),
        el('td', {}, r.requests), el('td', {}, r.input_tokens), el('td', {}, r.output_tokens)))));
}
