// forge serve's page: state, tabs, and the live stream (/events, server-sent
// events pushed by the server when the store changes; the page never polls).
import 'highlight.js/styles/github.css';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { api } from './api.js';
import { renderOverview } from './overview.js';
import { renderTree, renderLegend } from './tree.js';
import { renderPlot } from './plot.js';
import { renderNode } from './node.js';
import { renderLedger } from './ledger.js';
import { renderHistory } from './history.js';

const $ = (id) => document.getElementById(id);
const state = { tab: 'targets', target: null, node: null, overview: null, events: 0 };

function showError(e) {
  const f = $('error');
  f.hidden = !e;
  f.textContent = e ? String(e.message || e) : '';
}

async function guard(fn) {
  try { await fn(); showError(null); } catch (e) { showError(e); }
}

async function loadOverview() {
  state.overview = await api('overview');
  const d = state.overview.device || {};
  $('device').textContent = d.backend ? `${d.backend}${d.name ? ` · ${d.name}` : ''} · torch ${state.overview.torch || '?'}` : '';
  renderOverview($('overview'), state.overview, state.target, selectTarget);
  if (!state.target) {
    const first = (state.overview.targets || []).find((t) => (state.overview.journals || []).includes(t.id));
    if (first) await selectTarget(first.id);
  }
}

async function loadTree() {
  if (!state.target) return;
  const data = await api('tree', { target: state.target });
  renderTree($('tree'), data, state.node, selectNode);
  renderPlot($('plot'), data);
  $('tree').dataset.nodes = data.nodes.length;
}

async function selectTarget(id) {
  state.target = id;
  state.node = null;
  $('target-view').hidden = false;
  $('node-view').hidden = true;
  $('target-title').textContent = id;
  renderOverview($('overview'), state.overview, state.target, selectTarget);
  await guard(loadTree);
}

async function selectNode(id) {
  state.node = id;
  await guard(async () => {
    renderNode($('node-view'), await api('node', { target: state.target, node: id }));
    await loadTree();
  });
}

async function showTab(tab) {
  state.tab = tab;
  for (const b of document.querySelectorAll('nav button')) b.classList.toggle('active', b.dataset.tab === tab);
  for (const s of document.querySelectorAll('.tab')) s.hidden = s.id !== `tab-${tab}`;
  if (tab === 'ledger') await guard(async () => renderLedger($('tab-ledger'), await api('ledger')));
  if (tab === 'history') await guard(async () => renderHistory($('tab-history'), await api('history')));
}

function connect() {
  const live = $('live');
  const source = new EventSource('/events');
  const mark = (text) => {
    state.events += 1;
    live.textContent = text;
    live.dataset.events = state.events;
  };
  source.addEventListener('open', () => { live.className = 'live on'; live.textContent = 'live'; });
  source.addEventListener('error', () => { live.className = 'live off'; live.textContent = 'reconnecting…'; });
  source.addEventListener('journal', (e) => {
    const { target } = JSON.parse(e.data);
    mark(`search: ${target}`);
    if (target === state.target) guard(loadTree);
    else if (!state.target) guard(() => selectTarget(target));
  });
  source.addEventListener('overview', () => { mark('build progressed'); guard(loadOverview); });
  source.addEventListener('history', () => {
    mark('kernel committed');
    if (state.tab === 'history') showTab('history');
  });
}

for (const b of document.querySelectorAll('nav button')) b.addEventListener('click', () => showTab(b.dataset.tab));
renderLegend($('legend'));
guard(loadOverview);
connect();
// For tests and the curious: the page's state.
window.forgeGui = state;
