// The Sluice console: a view over the node's own HTTP API. Every request
// goes to this origin with the token the user gave (kept in this tab's
// sessionStorage only); the routes' scopes decide what it may see and do.
'use strict';

const REFRESH_MS = 2000;
// AWS list prices (us-east-1, 2026-12), the same table as `sluice bench`
// (src/bench/prices.rs; a test checks they agree): dollars per request.
const PRICE = { put: 0.005 / 1000, get: 0.0004 / 1000, ddbWrite: 0.625 / 1e6, ddbRead: 0.125 / 1e6 };

const $ = (sel, root = document) => root.querySelector(sel);
const view = () => $('#view');
let timer = null;     // the current page's refresh
let tail = null;      // the live tail's AbortController
let page = 0;         // bumped on every navigation: late answers of an old page are dropped

// ---- HTTP ----------------------------------------------------------------

function token() { return sessionStorage.getItem('sluice-token') || ''; }

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const headers = {};
  if (token()) headers.authorization = 'Bearer ' + token();
  if (body !== undefined) headers['content-type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'network', 'this node does not answer (' + e.message + ')');
  }
  const text = await r.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { /* metrics are text */ }
  if (!r.ok) {
    const e = (json && json.error) || {};
    if (r.status === 401) showLogin(true);
    throw new ApiError(r.status, e.code || String(r.status), e.message || text || r.statusText);
  }
  return json === null ? text : json;
}
const get = (p) => api('GET', p);

// ---- rendering helpers -----------------------------------------------------

function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}
function bytes(n) {
  if (n == null) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + ' ' + u[i];
}
function ms(v) {
  if (v == null) return 'none';
  if (v % 86400000 === 0) return v / 86400000 + ' d';
  if (v % 3600000 === 0) return v / 3600000 + ' h';
  return v + ' ms';
}
function when(msEpoch) { return msEpoch ? new Date(msEpoch).toISOString().replace('T', ' ').replace('Z', ' UTC') : '—'; }
const enc = encodeURIComponent;

function toast(msg, isErr) {
  const t = $('#toast');
  t.textContent = msg;
  t.className = isErr ? 'err' : '';
  t.hidden = false;
  clearTimeout(toast.t);
  toast.t = setTimeout(() => { t.hidden = true; }, isErr ? 8000 : 3000);
}
function failure(e) { return `<p class="err" data-error="${esc(e.code)}">${esc(e.status ? e.status + ' ' : '')}${esc(e.code)}: ${esc(e.message)}</p>`; }

function every(fn) {
  const mine = page;
  // Fixed rate: the next run starts REFRESH_MS after this one started.
  const run = async () => {
    if (mine !== page) return;
    const started = performance.now();
    try { await fn(mine); } catch (e) { if (mine === page) console.warn(e); }
    if (mine === page) timer = setTimeout(run, Math.max(0, REFRESH_MS - (performance.now() - started)));
  };
  run();
}

// ---- this node: ready / fenced / shutting down ------------------------------

async function checkNode() {
  const b = $('#banner');
  try {
    const r = await fetch('/ready');
    const s = await r.json();
    $('#whoami').textContent = `served by ${s.node_id} (epoch ${s.epoch})`;
    if (s.ready && !(await drained(s.node_id))) { b.hidden = true; return; }
    const reason = s.ready ? 'drained' : s.reason;
    const why = { fenced: 'is fenced: it no longer owns anything and its answers may be stale',
      shutting_down: 'is shutting down', draining: 'is shutting down: its streams are being handed to other nodes',
      drained: 'is drained: placement avoids it and its streams move to other nodes; it still serves and forwards',
      starting: 'is starting' }[reason] || ('is not ready (' + reason + ')');
    b.textContent = `This node (${s.node_id}) ${why}. Open the console on another node.`;
    b.dataset.reason = reason || '';
    b.hidden = false;
  } catch (e) {
    b.textContent = 'This node does not answer: it may have stopped. Open the console on another node.';
    b.dataset.reason = 'unreachable';
    b.hidden = false;
  }
}

// Whether an admin drained this node (only a token that may list nodes can tell).
async function drained(me) {
  try {
    const r = await fetch('/admin/nodes', { headers: token() ? { authorization: 'Bearer ' + token() } : {} });
    if (!r.ok) return false;
    return (await r.json()).nodes.some((n) => n.node_id === me && n.draining);
  } catch (_) { return false; }
}

function showLogin(show) { $('#login').hidden = !show; }

// ---- pages -------------------------------------------------------------------

const pages = {
  // #/ : nodes, lease holder, streams owned, WAL backlog.
  async overview() {
    view().innerHTML = `<h1>Cluster</h1><div id="nodes">loading…</div>
      <h2>This node</h2><div id="self"></div>`;
    every(async (mine) => {
      let html;
      let metrics = [];
      try {
        const [n, text] = await Promise.all([get('/admin/nodes'), get('/metrics').catch(() => '')]);
        metrics = parseMetrics(text);
        const me = $('#whoami').textContent.split(' ')[2];
        html = `<table id="node-table"><thead><tr><th>node</th><th>status</th><th class="num">epoch</th>
          <th class="num">heartbeats</th><th>lease</th><th class="num">streams owned</th><th class="num" title="acknowledged, not yet in data objects">WAL backlog</th>
          <th>HTTP</th><th>Kafka</th><th></th></tr></thead><tbody>` +
          n.nodes.map((x) => {
            const status = x.fenced ? 'fenced' : x.draining ? 'draining' : x.live ? 'live' : 'dead';
            const backlog = x.node_id === me ? bytes(sum(metrics, 'sluice_buffered_bytes')) : '…';
            return `<tr class="${status}" data-node="${esc(x.node_id)}" data-status="${status}">
              <td class="mono">${esc(x.node_id)}</td><td class="status ${status}">${status}</td>
              <td class="num">${x.epoch}</td><td class="num">${x.heartbeats}</td>
              <td>${n.lease_holder === x.node_id ? 'holder' : ''}</td><td class="num">${x.open_streams}</td>
              <td class="num" data-backlog="${esc(x.node_id)}">${status === 'live' || status === 'draining' ? backlog : '—'}</td><td class="mono">${esc(x.http_addr)}</td><td class="mono">${esc(x.kafka_addr)}</td>
              <td>${status === 'live' ? `<button data-drain="${esc(x.node_id)}">drain</button>` : ''}</td></tr>`;
          }).join('') + '</tbody></table>' +
          `<p class="muted">Refreshed ${new Date().toLocaleTimeString()} every ${REFRESH_MS / 1000} s. A node is fenced once the others have counted enough of their own heartbeats without one of its.</p>`;
      } catch (e) { html = failure(e); }
      if (mine !== page) return;
      $('#nodes').innerHTML = html;
      // Every other node's WAL backlog, through this node (its metrics):
      // filled in as each answers, so a silent node delays nothing else.
      for (const cell of document.querySelectorAll('#node-table td[data-backlog]')) {
        if (cell.textContent !== '…') continue;
        get(`/admin/nodes/${enc(cell.dataset.backlog)}/metrics`)
          .then((text) => { cell.textContent = bytes(sum(parseMetrics(text), 'sluice_buffered_bytes')); })
          .catch((e) => { cell.textContent = e.code === 'unavailable' ? 'no answer' : e.code; });
      }
      if (metrics.length) {
        const m = metrics;
        $('#self').innerHTML = `<table><tbody>
          <tr><th>records appended</th><td class="num">${sum(m, 'sluice_appended_records_total')}</td></tr>
          <tr><th>bytes appended</th><td class="num">${bytes(sum(m, 'sluice_appended_bytes_total'))}</td></tr>
          <tr><th>buffered, not yet in data objects</th><td class="num">${bytes(sum(m, 'sluice_buffered_bytes'))}</td></tr>
          <tr><th>object-store requests</th><td class="num">${sum(m, 'sluice_object_store_requests_total')}</td></tr>
          <tr><th>nodes fenced (seen here)</th><td class="num">${sum(m, 'sluice_nodes_fenced_total')}</td></tr></tbody></table>`;
      }
    });
    view().onclick = async (ev) => {
      const id = ev.target.dataset.drain;
      if (!id || !confirm(`Drain ${id}? Its streams move to other nodes and it takes no new ones.`)) return;
      try { await api('POST', `/admin/nodes/${enc(id)}/drain`); toast(`${id} is draining`); } catch (e) { toast(e.message, true); }
    };
  },

  // #/topics : list, create, delete.
  async topics() {
    view().innerHTML = `<h1>Topics</h1>
      <form class="inline" id="create-topic">
        <label>name<input name="name" required pattern="[A-Za-z0-9._\\-]+" maxlength="249"></label>
        <label>partitions<input name="partitions" type="number" min="1" max="10000" value="3"></label>
        <label>cleanup policy<select name="cleanup_policy"><option>delete</option><option>compact</option><option value="compact,delete">compact,delete</option></select></label>
        <label>retention (ms, empty: none)<input name="retention_ms" type="number" min="1"></label>
        <button class="primary" type="submit">Create topic</button>
      </form><div id="topic-list">loading…</div>`;
    $('#create-topic').onsubmit = async (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const config = { cleanup_policy: f.get('cleanup_policy') };
      if (f.get('retention_ms')) config.retention_ms = Number(f.get('retention_ms'));
      try {
        await api('POST', '/v1/topics', { name: f.get('name'), partitions: Number(f.get('partitions')), config });
        toast(`created ${f.get('name')}`);
        ev.target.reset();
        refresh();
      } catch (e) { toast(e.message, true); }
    };
    const refresh = async () => {
      let html;
      try {
        const { topics } = await get('/v1/topics');
        const plain = topics.filter((t) => !t.name.startsWith('ds.')).sort((a, b) => a.name.localeCompare(b.name));
        const described = await Promise.all(plain.slice(0, 200).map((t) => get(`/v1/topics/${enc(t.name)}`).catch((e) => ({ name: t.name, error: e }))));
        html = `<table id="topic-table"><thead><tr><th>topic</th><th class="num">partitions</th><th class="num">records (end − start)</th>
          <th class="num">bytes</th><th>cleanup</th><th>retention</th><th></th></tr></thead><tbody>` +
          described.map((d) => d.error ? `<tr><td>${esc(d.name)}</td><td colspan="6">${failure(d.error)}</td></tr>` :
            `<tr data-topic="${esc(d.name)}"><td><a href="#/topic/${enc(d.name)}">${esc(d.name)}</a></td><td class="num">${d.partitions}</td>
              <td class="num">${d.partition_info.reduce((s, p) => s + (p.end_offset - p.start_offset), 0)}</td>
              <td class="num">${bytes(d.partition_info.reduce((s, p) => s + (p.bytes || 0), 0))}</td>
              <td>${esc(d.config.cleanup_policy || 'delete')}</td><td>${ms(d.config.retention_ms)}</td>
              <td><button class="danger" data-delete="${esc(d.name)}">delete</button></td></tr>`).join('') +
          '</tbody></table>' + (plain.length > 200 ? `<p class="muted">The first 200 of ${plain.length}.</p>` : '');
      } catch (e) { html = failure(e); }
      $('#topic-list').innerHTML = html;
    };
    view().onclick = async (ev) => {
      const name = ev.target.dataset.delete;
      if (!name) return;
      if (!confirm(`Delete topic ${name} and all its records? This cannot be undone.`)) return;
      try { await api('DELETE', `/v1/topics/${enc(name)}`); toast(`deleted ${name}`); } catch (e) { toast(`${e.code}: ${e.message}`, true); }
      refresh();
    };
    every(refresh);
  },

  // #/topic/NAME : partitions, owners, transfers.
  async topic(name) {
    view().innerHTML = `<h1>Topic <span class="mono">${esc(name)}</span></h1><div id="topic">loading…</div>`;
    let nodes = [];
    get('/admin/nodes').then((n) => { nodes = n.nodes.filter((x) => x.live && !x.fenced); }).catch(() => {});
    every(async (mine) => {
      let html;
      try {
        const d = await get(`/v1/topics/${enc(name)}`);
        html = `<p>Topic id <span class="mono">${esc(d.topic_id)}</span>. Config: <code>${esc(JSON.stringify(d.config))}</code></p>
          <table id="partition-table"><thead><tr><th>partition</th><th>owner</th><th class="num">stream epoch</th><th>state</th>
          <th class="num">start</th><th class="num">high watermark</th><th class="num">compacted to</th><th class="num">bytes</th><th>transfer to</th></tr></thead><tbody>` +
          d.partition_info.map((p) => `<tr data-partition="${p.partition}"><td><a href="#/p/${enc(name)}/${p.partition}">${p.partition}</a></td>
            <td class="mono">${esc(p.owner || '—')}</td><td class="num">${p.stream_epoch}</td><td>${esc(p.state)}</td>
            <td class="num">${p.start_offset}</td><td class="num">${p.end_offset}</td><td class="num">${p.compacted_end}</td><td class="num">${bytes(p.bytes)}</td>
            <td><select data-to="${p.partition}">${nodes.filter((x) => x.node_id !== p.owner).map((x) => `<option>${esc(x.node_id)}</option>`).join('')}</select>
              <button data-transfer="${p.partition}">move</button></td></tr>`).join('') + '</tbody></table>';
      } catch (e) { html = failure(e); }
      if (mine === page && !document.activeElement?.matches('select')) $('#topic').innerHTML = html;
    });
    view().onclick = async (ev) => {
      const p = ev.target.dataset.transfer;
      if (p === undefined) return;
      const to = $(`select[data-to="${p}"]`).value;
      if (!to || !confirm(`Move ${name}/${p} to ${to}?`)) return;
      try { await api('POST', `/admin/streams/${enc(name)}/${p}/transfer`, { to }); toast(`moving ${name}/${p} to ${to}`); } catch (e) { toast(e.message, true); }
    };
  },

  // #/p/NAME/P : browse by offset or time, live tail.
  async partition(name, p) {
    view().innerHTML = `<h1>Partition <span class="mono">${esc(name)}/${esc(p)}</span></h1>
      <form class="inline" id="browse">
        <label>from offset<input name="offset" type="number" min="0" placeholder="start"></label>
        <label>or from time<input name="time" type="datetime-local" step="1"></label>
        <label>records<input name="limit" type="number" min="1" max="1000" value="50"></label>
        <label>show values as<select name="format"><option value="text">text</option><option value="json">JSON</option><option value="hex">hex</option></select></label>
        <label>isolation<select name="isolation"><option value="read_committed">read_committed</option><option value="read_uncommitted">read_uncommitted</option></select></label>
        <button class="primary" type="submit">Read</button>
        <button type="button" id="tail-toggle">Start live tail</button>
      </form>
      <div id="tail-box" hidden><h2>Live tail <span id="tail-count" class="muted"></span></h2>
        <table><thead><tr><th class="num">offset</th><th>time</th><th>key</th><th>value</th><th>headers</th></tr></thead><tbody id="tail"></tbody></table></div>
      <div id="records"></div>`;
    const form = $('#browse');
    let next = null;
    const read = async (from) => {
      const f = new FormData(form);
      const q = new URLSearchParams({ limit: f.get('limit') || '50', encoding: 'base64', isolation: f.get('isolation') });
      if (from != null) q.set('offset', from);
      else if (f.get('time')) q.set('timestamp', String(new Date(f.get('time')).getTime()));
      else if (f.get('offset') !== '') q.set('offset', f.get('offset'));
      try {
        const r = await get(`/v1/topics/${enc(name)}/partitions/${p}/records?${q}`);
        next = r.next_offset;
        $('#records').innerHTML = `<p class="muted">start ${r.start_offset}, high watermark ${r.high_watermark}</p>` +
          recordTable(r.records, f.get('format')) +
          (r.next_offset < r.high_watermark ? '<p><button id="more">next page</button></p>' : '<p class="muted">at the end</p>');
      } catch (e) { $('#records').innerHTML = failure(e); }
    };
    form.onsubmit = (ev) => { ev.preventDefault(); read(null); };
    view().onclick = (ev) => {
      if (ev.target.id === 'more') read(next);
      if (ev.target.id === 'tail-toggle') tail ? stopTail() : startTail(name, p, () => new FormData(form).get('format'));
    };
    read(null);
  },

  // #/groups : groups with state, members and lag.
  async groups() {
    view().innerHTML = '<h1>Consumer groups</h1><div id="groups">loading…</div>';
    every(async (mine) => {
      let html;
      try {
        const { groups } = await get('/v1/groups');
        const details = await Promise.all(groups.slice(0, 100).map((g) => get(`/v1/groups/${enc(g.group)}`).catch(() => null)));
        html = groups.length === 0 ? '<p class="muted">No group has members or committed offsets.</p>' :
          `<table id="group-table"><thead><tr><th>group</th><th>kind</th><th>state</th><th class="num">members</th><th class="num">total lag</th></tr></thead><tbody>` +
          groups.map((g, i) => {
            const lag = details[i] ? details[i].offsets.reduce((s, o) => s + (o.lag || 0), 0) : null;
            return `<tr data-group="${esc(g.group)}" data-lag="${lag ?? ''}"><td><a href="#/group/${enc(g.group)}">${esc(g.group)}</a></td>
              <td>${esc(g.kind)}</td><td>${esc(g.state)}</td><td class="num">${g.members}</td><td class="num lag">${lag ?? '—'}</td></tr>`;
          }).join('') + '</tbody></table>';
      } catch (e) { html = failure(e); }
      if (mine === page) $('#groups').innerHTML = html;
    });
  },

  // #/group/NAME : members, assignments, committed offsets and lag per partition.
  async group(name) {
    view().innerHTML = `<h1>Group <span class="mono">${esc(name)}</span></h1><div id="group">loading…</div>`;
    every(async (mine) => {
      let html;
      try {
        const g = await get(`/v1/groups/${enc(name)}`);
        html = `<p>${esc(g.kind)} group, ${esc(g.state)}, generation ${g.generation}${g.protocol ? ', protocol ' + esc(g.protocol) : ''}.
            <span class="muted">Members as the metadata log last recorded them.</span></p>
          <h2>Members</h2>` + (g.members.length === 0 ? '<p class="muted">none</p>' :
          `<table id="member-table"><thead><tr><th>member</th><th>client</th><th>host</th><th>assigned</th></tr></thead><tbody>` +
          g.members.map((m) => `<tr><td class="mono">${esc(m.member_id)}${m.member_id === g.leader ? ' (leader)' : ''}</td><td>${esc(m.client_id)}</td>
            <td>${esc(m.client_host)}</td><td>${m.assignment_error ? '<span class="muted">' + esc(m.assignment_error) + '</span>' : m.assignment.map((a) => esc(a.topic) + ' ' + a.partitions.join(',')).join('; ') || '—'}</td></tr>`).join('') +
          '</tbody></table>') +
          `<h2>Committed offsets</h2><table id="offset-table"><thead><tr><th>topic</th><th class="num">partition</th><th class="num">committed</th>
            <th class="num">high watermark</th><th class="num">lag</th></tr></thead><tbody>` +
          g.offsets.map((o) => `<tr data-tp="${esc(o.topic)}/${o.partition}"><td>${esc(o.topic)}</td><td class="num">${o.partition}</td><td class="num">${o.committed}</td>
            <td class="num">${o.end_offset ?? '—'}</td><td class="num lag">${o.lag ?? esc(o.error)}</td></tr>`).join('') + '</tbody></table>';
      } catch (e) { html = failure(e); }
      if (mine === page) $('#group').innerHTML = html;
    });
  },

  // #/streams : Durable Streams, their forks and expiry.
  async streams() {
    view().innerHTML = '<h1>Durable Streams</h1><div id="streams">loading…</div>';
    every(async (mine) => {
      let html;
      try {
        const { topics } = await get('/v1/topics');
        const ds = await Promise.all(topics.filter((t) => t.name.startsWith('ds.')).slice(0, 200)
          .map((t) => get(`/v1/topics/${enc(t.name)}`).catch(() => null)));
        const streams = ds.filter((d) => d && d.config.durable);
        const forks = {};
        for (const d of streams) if (d.config.durable.fork) (forks[d.config.durable.fork.source] ||= []).push(d.config.durable.path);
        html = streams.length === 0 ? '<p class="muted">No Durable Streams.</p>' :
          `<table id="stream-table"><thead><tr><th>path</th><th>content type</th><th class="num">end offset</th><th>fork of</th><th>forks</th>
            <th>expires</th><th>closed</th></tr></thead><tbody>` +
          streams.map((d) => {
            const m = d.config.durable;
            const src = m.fork ? (streams.find((s) => s.name === m.fork.source)?.config.durable.path || m.fork.source) + ' @ ' + m.fork.offset : '';
            const exp = m.expires_at_ms ? when(m.expires_at_ms) : m.ttl_secs ? `${m.ttl_secs} s after last use (${when(m.touched_ms + m.ttl_secs * 1000)})` : 'never';
            return `<tr><td class="mono">${esc(m.path)}${m.deleted ? ' <span class="err">deleted, kept for forks</span>' : ''}</td><td>${esc(m.content_type)}</td>
              <td class="num">${streamEnd(d)}</td><td class="mono">${esc(src)}</td>
              <td class="mono">${esc((forks[d.name] || []).join(', '))}</td><td>${esc(exp)}</td><td>${m.closed_at != null ? 'at ' + m.closed_at : ''}</td></tr>`;
          }).join('') + '</tbody></table>';
      } catch (e) { html = failure(e); }
      if (mine === page) $('#streams').innerHTML = html;
    });
  },

  // #/charts : rates, ack latency, object-store requests and their cost, from /metrics.
  async charts() {
    view().innerHTML = `<h1>Charts <span class="muted">(from each node's /metrics, every ${REFRESH_MS / 1000} s)</span></h1>
      <form class="inline"><label>node<select id="chart-node"><option value="">this node</option></select></label></form>
      <div class="cards" id="cards"></div>`;
    const empty = () => ({ append: [], read: [], p50: [], p99: [], puts: [], gets: [], cost: [] });
    let series = empty();
    let last = null;
    const pick = $('#chart-node');
    get('/admin/nodes').then((n) => {
      for (const x of n.nodes.filter((x) => !x.fenced)) pick.insertAdjacentHTML('beforeend', `<option>${esc(x.node_id)}</option>`);
    }).catch(() => { pick.disabled = true; pick.title = 'listing nodes needs admin on *'; });
    pick.onchange = () => { series = empty(); last = null; };
    every(async (mine) => {
      const from = pick.value;
      const m = parseMetrics(await get(from ? `/admin/nodes/${enc(from)}/metrics` : '/metrics'));
      if (from !== pick.value) return;
      const now = { t: performance.now(), m };
      if (last) {
        const dt = (now.t - last.t) / 1000;
        const d = (name, f) => Math.max(0, sum(m, name, f) - sum(last.m, name, f)) / dt;
        series.append.push(d('sluice_appended_records_total'));
        series.read.push(d('sluice_read_bytes_total'));
        // No appends in the interval: no latency point (a gap, not a zero).
        const q = quantiles(last.m, m, 'sluice_append_seconds_bucket', [0.5, 0.99]);
        series.p50.push(q && q[0] * 1000); series.p99.push(q && q[1] * 1000);
        const isPut = (l) => l.op === 'put' || l.op === 'list';
        const isGet = (l) => l.op === 'get' || l.op === 'get_range';
        const puts = d('sluice_object_store_requests_total', isPut), gets = d('sluice_object_store_requests_total', isGet);
        const wcu = d('sluice_meta_capacity_units_total', (l) => l.kind === 'write'), rcu = d('sluice_meta_capacity_units_total', (l) => l.kind === 'read');
        series.puts.push(puts); series.gets.push(gets);
        series.cost.push((puts * PRICE.put + gets * PRICE.get + wcu * PRICE.ddbWrite + rcu * PRICE.ddbRead) * 3600);
        for (const s of Object.values(series)) if (s.length > 90) s.shift();
      }
      last = now;
      if (mine !== page) return;
      $('#cards').innerHTML = [
        card('Appends', 'records/s', [['appended', series.append]]),
        card('Reads', 'bytes/s', [['read', series.read]]),
        card('Acknowledgement latency', 'ms', [['p50', series.p50], ['p99', series.p99]]),
        card('Object-store requests', 'requests/s', [['PUT + LIST', series.puts], ['GET', series.gets]]),
        card('Request cost', '$/hour at S3 Standard and DynamoDB list prices', [['cost', series.cost]], 4),
      ].join('');
    });
  },

  // #/admin : tokens.
  async admin() {
    view().innerHTML = `<h1>Tokens</h1>
      <form class="inline" id="issue">
        <label>name<input name="name" required maxlength="100"></label>
        <label>topics (glob)<input name="topics" value="*" required></label>
        <label><span><input type="checkbox" name="read" checked> read</span></label>
        <label><span><input type="checkbox" name="write"> write</span></label>
        <label><span><input type="checkbox" name="admin"> admin</span></label>
        <label>expires in (s, empty: never)<input name="expires" type="number" min="1"></label>
        <button class="primary" type="submit">Issue token</button>
      </form><div id="secret"></div><div id="tokens">loading…</div>`;
    const refresh = async () => {
      try {
        const { tokens } = await get('/v1/tokens');
        $('#tokens').innerHTML = `<table id="token-table"><thead><tr><th>id</th><th>name</th><th>scopes</th><th>created</th><th>expires</th><th></th></tr></thead><tbody>` +
          tokens.map((t) => `<tr><td class="mono">${esc(t.id)}</td><td>${esc(t.name)}</td>
            <td>${t.scopes.map((s) => esc(s.topics) + ': ' + s.ops.map(esc).join('+')).join('; ')}</td><td>${when(t.created_at)}</td>
            <td>${t.expires_at ? when(t.expires_at) + (t.expired ? ' (expired)' : '') : 'never'}</td>
            <td><button class="danger" data-revoke="${esc(t.id)}">revoke</button></td></tr>`).join('') + '</tbody></table>';
      } catch (e) { $('#tokens').innerHTML = failure(e); }
    };
    $('#issue').onsubmit = async (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const ops = ['read', 'write', 'admin'].filter((o) => f.get(o));
      const body = { name: f.get('name'), scopes: [{ topics: f.get('topics'), ops }] };
      if (f.get('expires')) body.expires_in_sec = Number(f.get('expires'));
      try {
        const t = await api('POST', '/v1/tokens', body);
        $('#secret').innerHTML = `<p class="secret">Token <b>${esc(t.id)}</b>: <span class="mono" id="new-token">${esc(t.token)}</span><br>
          Copy it now: it is not shown again.</p>`;
        refresh();
      } catch (e) { toast(e.message, true); }
    };
    view().onclick = async (ev) => {
      const id = ev.target.dataset.revoke;
      if (!id || !confirm(`Revoke token ${id}? Every node refuses it once the revocation applies.`)) return;
      try { await api('DELETE', `/v1/tokens/${enc(id)}`); toast(`revoked ${id}`); } catch (e) { toast(e.message, true); }
      refresh();
    };
    refresh();
  },
};

// A stream's end offset as its readers count: a fork's own records follow
// what it inherits (its topic's offset 0 is the fork point, plus one for a
// partial record).
function streamEnd(d) {
  const own = d.partition_info[0]?.end_offset;
  if (own == null) return '—';
  const f = d.config.durable.fork;
  return f ? f.offset + (f.partial != null ? 1 : 0) + own : own;
}

// ---- records -------------------------------------------------------------------

function b64bytes(s) {
  if (s == null) return null;
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
function show(b64, format) {
  const b = b64bytes(b64);
  if (b === null) return '<span class="muted">null</span>';
  if (format === 'hex') return esc(Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(' '));
  const text = new TextDecoder('utf-8', { fatal: false }).decode(b);
  if (format === 'json') {
    try { return esc(JSON.stringify(JSON.parse(text), null, 2)); } catch (_) { return esc(text) + ' <span class="muted">(not JSON)</span>'; }
  }
  return esc(text);
}
function headersText(h) {
  if (!h) return '';
  const list = Array.isArray(h) ? h : Object.entries(h).map(([k, v]) => ({ key: k, value: v }));
  return list.map((x) => esc(x.key ?? x[0]) + '=' + show(x.value ?? x[1], 'text')).join(', ');
}
function recordRow(r, format) {
  return `<tr data-offset="${r.offset}"><td class="num">${r.offset}</td><td>${when(r.timestamp)}</td><td><pre>${show(r.key, 'text')}</pre></td>
    <td><pre>${show(r.value, format)}</pre></td><td>${headersText(r.headers)}</td></tr>`;
}
function recordTable(records, format) {
  if (records.length === 0) return '<p class="muted">No records here.</p>';
  return `<table id="record-table"><thead><tr><th class="num">offset</th><th>time</th><th>key</th><th>value</th><th>headers</th></tr></thead><tbody>` +
    records.map((r) => recordRow(r, format)).join('') + '</tbody></table>';
}

// The live tail reads the SSE route with fetch (an EventSource cannot send the
// bearer token), from the end of the partition, and resumes after a drop from
// the last offset it showed.
async function startTail(name, p, format) {
  const ctl = new AbortController();
  tail = ctl;
  $('#tail-box').hidden = false;
  $('#tail-toggle').textContent = 'Stop live tail';
  let last = null, count = 0;
  while (tail === ctl) {
    try {
      const headers = { accept: 'text/event-stream' };
      if (token()) headers.authorization = 'Bearer ' + token();
      const from = last === null ? '-1' : String(last + 1);
      const r = await fetch(`/v1/topics/${enc(name)}/partitions/${p}/subscribe?offset=${from}&encoding=base64`, { headers, signal: ctl.signal });
      if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
      $('#tail-count').textContent = 'connected';
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const ev = {};
          for (const line of block.split('\n')) {
            const c = line.indexOf(':');
            if (c > 0) ev[line.slice(0, c)] = (ev[line.slice(0, c)] || '') + line.slice(c + 1).replace(/^ /, '');
          }
          if (ev.event === 'record') {
            const rec = JSON.parse(ev.data);
            last = rec.offset;
            count++;
            const body = $('#tail');
            if (!body) return;
            body.insertAdjacentHTML('afterbegin', recordRow(rec, format()));
            while (body.rows.length > 200) body.deleteRow(-1);
            $('#tail-count').textContent = `${count} record${count === 1 ? '' : 's'} since it started`;
          } else if (ev.event === 'error') {
            $('#tail-count').textContent = 'reconnecting: ' + ev.data;
          }
        }
      }
    } catch (e) {
      if (tail !== ctl) return;
      if ($('#tail-count')) $('#tail-count').textContent = 'reconnecting: ' + e.message;
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}
function stopTail() {
  if (tail) tail.abort();
  tail = null;
  const b = $('#tail-toggle');
  if (b) b.textContent = 'Start live tail';
}

// ---- metrics -------------------------------------------------------------------

// Prometheus text → [{name, labels, value}].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}
function sum(metrics, name, filter) {
  return metrics.filter((x) => x.name === name && (!filter || filter(x.labels))).reduce((s, x) => s + x.value, 0);
}
// Quantiles of a histogram's observations between two scrapes (upper bucket bounds).
function quantiles(before, after, bucket, qs) {
  const cum = (ms) => {
    const by = {};
    for (const x of ms) if (x.name === bucket) by[x.labels.le] = (by[x.labels.le] || 0) + x.value;
    return by;
  };
  const a = cum(after), b = cum(before);
  const les = Object.keys(a).sort((x, y) => (x === '+Inf') - (y === '+Inf') || Number(x) - Number(y));
  const delta = les.map((le) => [le, (a[le] || 0) - (b[le] || 0)]);
  const total = delta.length ? delta[delta.length - 1][1] : 0;
  if (total <= 0) return null;
  return qs.map((q) => {
    const hit = delta.find(([, c]) => c >= q * total);
    return !hit || hit[0] === '+Inf' ? Number(les[les.length - 2] || 0) : Number(hit[0]);
  });
}
function card(title, unit, lines, digits = 1) {
  const colors = ['#1f6feb', '#cf222e'];
  const all = lines.flatMap(([, s]) => s).filter((v) => v != null);
  const max = Math.max(1e-9, ...all);
  const w = 300, h = 100;
  const n = Math.max(2, ...lines.map(([, s]) => s.length));
  // A gap (null) ends one polyline and starts the next.
  const polys = (s, color) => {
    const runs = [[]];
    s.forEach((v, i) => {
      if (v == null) runs.push([]);
      else runs[runs.length - 1].push(`${((i / (n - 1)) * w).toFixed(1)},${(h - (v / max) * (h - 4)).toFixed(1)}`);
    });
    return runs.filter((r) => r.length).map((r) => `<polyline stroke="${color}" points="${r.length === 1 ? r[0] + ' ' + r[0] : r.join(' ')}"/>`).join('');
  };
  const latest = (s) => { for (let i = s.length - 1; i >= 0; i--) if (s[i] != null) return s[i].toFixed(digits); return '—'; };
  const now = lines.map(([label, s], i) => `<span><svg width="10" height="10"><rect width="10" height="10" fill="${colors[i]}"/></svg> ${esc(label)}: ${latest(s)}</span>`).join('');
  return `<div class="card" data-chart="${esc(title)}"><h3>${esc(title)} <span class="muted">${esc(unit)}</span></h3>
    <svg class="chart" viewBox="0 0 ${w} ${h}" preserveAspectRatio="none">${lines.map(([, s], i) => polys(s, colors[i])).join('')}</svg>
    <div class="legend">${now} <span class="muted">top: ${max.toFixed(digits)}</span></div></div>`;
}

// ---- routing -------------------------------------------------------------------

function route() {
  page++;
  clearTimeout(timer);
  stopTail();
  view().onclick = null;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  const [head, ...rest] = parts;
  const name = { '': 'overview', topics: 'topics', topic: 'topic', p: 'partition', groups: 'groups', group: 'group',
    streams: 'streams', charts: 'charts', admin: 'admin' }[head] || 'overview';
  const nav = { topic: 'topics', partition: 'topics', group: 'groups' }[name] || name;
  for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.dataset.nav === nav);
  pages[name](...rest);
}

function start() {
  $('#login').onsubmit = (ev) => {
    ev.preventDefault();
    sessionStorage.setItem('sluice-token', $('#token').value.trim());
    $('#token').value = '';
    showLogin(false);
    $('#signout').hidden = false;
    route();
  };
  $('#signout').onclick = () => { sessionStorage.removeItem('sluice-token'); $('#signout').hidden = true; route(); };
  $('#signout').hidden = !token();
  window.addEventListener('hashchange', route);
  checkNode();
  setInterval(checkNode, REFRESH_MS);
  route();
}
start();
