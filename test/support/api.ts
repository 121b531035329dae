// The one helper for the control plane's REST API in tests, for a control
// plane run as a process (test/support/runtime.ts) or in this process
// (test/support/control-plane.ts): both hand out a URL, a CA file and an admin token.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';

/** Calls the control plane's API (a process's or an in-process one's), as its admin unless `admin` is false. */
export async function api<T = Record<string, unknown>>(cp: { url: string; caFile: string; adminToken?: string }, method: string, path: string, body?: unknown, admin = true): Promise<{ status: number; body: T }> {
  const dispatcher = new Agent({ connect: { ca: readFileSync(cp.caFile, 'utf8') } });
  try {
    const res = await request(`${cp.url}${path}`, {
      method: method as 'GET',
      dispatcher,
      headers: { 'content-type': 'application/json', ...(admin ? { authorization: `Bearer ${cp.adminToken}` } : {}) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: (text ? JSON.parse(text) : {}) as T };
  } finally {
    await dispatcher.close();
  }
}

