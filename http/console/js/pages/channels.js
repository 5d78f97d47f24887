// Notification channels: create, test (with the test delivery's outcome), enable/disable.
import * as api from '../api.js';
import { h, mount, form, table, pageHead, statusBadge, toast, dialog, secretBox, errorText, fmtTime } from '../ui.js';

const templates = {
  webhook: { url: 'https://hooks.example/lookout', headers: {} },
  slack: { url: 'https://hooks.slack.com/services/…' },
  email: { host: 'smtp.example.com', port: 587, username: '', password: '', from: 'lookout@example.com', to: ['ops@example.com'], starttls: true },
};

export async function list(ctx) {
  const pid = ctx.params.pid;
  const rows = await api.list(`/notification-channels?project_id=${pid}`);
  const open = (c) => {
    const f = form([
      { name: 'name', label: 'Name', required: true, value: c ? c.name : '' },
      { name: 'type', label: 'Type', type: 'select', value: c ? c.type : 'webhook', options: ['webhook', 'slack', 'email'] },
      { name: 'config', label: 'Config (JSON)', type: 'json', rows: 8, value: c ? c.config : templates.webhook, help: 'Secrets (signing secret, header values, the Slack URL, the SMTP password) are write-only: reads show them masked, and a masked value sent back keeps the stored one.' },
      { name: 'enabled', label: 'Enabled', type: 'checkbox', value: c ? c.enabled : true },
    ], {
      submit: c ? 'Save channel' : 'Create channel',
      onSubmit: async (v) => {
        if (c) {
          delete v.type;
          await api.put('/notification-channels/' + c.id, v);
          d.close();
        } else {
          const out = await api.post('/notification-channels', { ...v, project_id: pid });
          if (out.signing_secret) {
            mount(d.body, h('p', {}, 'Receivers verify each request with the Standard Webhooks signature.'), secretBox(out.signing_secret, 'the signing secret'));
            await list(ctx);
            return;
          }
          d.close();
        }
        toast('Channel saved');
        await list(ctx);
      },
    });
    if (c) f.inputs.type.input.disabled = true;
    else f.inputs.type.input.addEventListener('change', (e) => { f.inputs.config.input.value = JSON.stringify(templates[e.target.value], null, 2); });
    const d = dialog(c ? `Channel ${c.name}` : 'New channel', f, [{ label: 'Close' }]);
  };
  const test = async (c) => {
    const out = h('div', { id: 'test-outcome' }, h('p', {}, 'Queued a test delivery…'));
    const d = dialog(`Test ${c.name}`, out, [{ label: 'Close' }]);
    try {
      let dl = await api.post(`/notification-channels/${c.id}/test`);
      // Follow the delivery until it ends or waits for a retry: it goes through the real
      // channel code, so the outcome is what an incident would get.
      for (let i = 0; i < 40 && d.el.open && (dl.status === 'pending' || dl.status === 'delivering'); i++) {
        mount(out, h('p', {}, 'Delivery ', statusBadge(dl.status), dl.waiting_reason ? ` (waiting: ${dl.waiting_reason})` : '', '…'));
        await new Promise((r) => setTimeout(r, 500));
        dl = await api.get('/alert-deliveries/' + dl.id);
      }
      mount(out, h('div', { class: 'notice ' + (dl.status === 'delivered' ? 'ok' : dl.status === 'pending' ? 'warn' : 'bad') },
        h('p', {}, 'Test delivery ', statusBadge(dl.status), dl.last_status_code ? ` — the receiver answered ${dl.last_status_code}` : ''),
        dl.last_error ? h('p', {}, dl.last_error) : null,
        dl.next_attempt_at && dl.status !== 'delivered' ? h('p', {}, 'Next attempt ', fmtTime(dl.next_attempt_at)) : null));
    } catch (e) { mount(out, h('div', { class: 'notice bad' }, errorText(e))); }
  };
  mount(ctx.el, pageHead('Channels', h('button', { class: 'primary', id: 'new-channel', onclick: () => open(null) }, 'New channel')),
    h('p', { class: 'muted' }, 'Where incidents are announced: webhooks (signed), Slack-compatible hooks and e-mail.'),
    table([
      { label: 'Name', get: (c) => c.name },
      { label: 'Type', get: (c) => c.type },
      { label: 'Target', get: (c) => h('code', { class: 'small' }, c.type === 'email' ? (c.config.to || []).join(', ') : c.config.url) },
      { label: 'State', get: (c) => statusBadge(c.enabled ? 'enabled' : 'disabled') },
      { label: '', get: (c) => h('span', { class: 'row' },
        h('button', { onclick: () => test(c) }, 'Test'),
        h('button', { onclick: async () => { try { await api.post(`/notification-channels/${c.id}/${c.enabled ? 'disable' : 'enable'}`); } catch (e) { toast(errorText(e), 'bad'); } await list(ctx); } }, c.enabled ? 'Disable' : 'Enable'),
        h('button', { onclick: () => open(c) }, 'Edit')) },
    ], rows, { empty: 'No channel yet.' }));
}
