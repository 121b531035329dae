import { describe, expect, it } from 'vitest';
import { checkRotation } from './credential-rotation.ts';
import { dockerConfigJson } from './credential-secret.ts';

const HOST = 'registry.rlmesh.dev';
const CONTROL = `rlm_cc_${'C'.repeat(40)}`;
const PULL = `rlm_rp_${'P'.repeat(40)}`;
const RELAY = `rlm_rs_${'R'.repeat(40)}`;
const pull = (auths: Record<string, unknown>) => JSON.stringify({ auths });
const entry = (username: string, password: string) => ({ username, password, auth: Buffer.from(`${username}:${password}`).toString('base64') });

describe('checkRotation', () => {
  it('accepts each purpose in the form a join gives it', () => {
    expect(checkRotation({ purpose: 'control', value: CONTROL }, HOST)).toEqual({ ok: true, rotation: { purpose: 'control', value: CONTROL } });
    expect(checkRotation({ purpose: 'relay', value: RELAY }, HOST)).toEqual({ ok: true, rotation: { purpose: 'relay', value: RELAY } });
    const value = dockerConfigJson(HOST, 'c_abc', PULL);
    expect(checkRotation({ purpose: 'pull', value }, HOST)).toEqual({ ok: true, rotation: { purpose: 'pull', value } });
  });

  const refused: [string, { purpose: string; value: string }, RegExp][] = [
    ['an unknown purpose', { purpose: 'webhook', value: CONTROL }, /purpose is not one this agent stores \(control, pull, relay\)/],
    ['an empty purpose', { purpose: '', value: CONTROL }, /purpose is not one/],
    ['a control value of another form', { purpose: 'control', value: 'new-control' }, /is not a control credential \(rlm_cc_ followed by 32/],
    ['a control value with the prefix of another purpose', { purpose: 'control', value: RELAY }, /is not a control credential/],
    ['a relay value with a newline', { purpose: 'relay', value: `${RELAY}\n` }, /is not a relay credential/],
    ['a bare pull credential (not a dockerconfigjson)', { purpose: 'pull', value: PULL }, /is not JSON/],
    ['a pull value that is JSON but no dockerconfigjson', { purpose: 'pull', value: JSON.stringify({ password: PULL }) }, /dockerconfigjson for registry\.rlmesh\.dev: auths is not an object of registries/],
    ['a pull value for another registry', { purpose: 'pull', value: pull({ 'evil.example': entry('c_abc', PULL) }) }, /auths must name exactly one registry, registry\.rlmesh\.dev/],
    ['a pull value for two registries', { purpose: 'pull', value: pull({ [HOST]: entry('c_abc', PULL), 'evil.example': entry('c_abc', PULL) }) }, /must name exactly one registry/],
    ['a pull value whose password is not a pull credential', { purpose: 'pull', value: pull({ [HOST]: entry('c_abc', CONTROL) }) }, /password is not a pull credential/],
    ['a pull value whose auth does not match', { purpose: 'pull', value: pull({ [HOST]: { ...entry('c_abc', PULL), auth: 'eA==' } }) }, /auth is not base64 of username:password/],
    ['a pull value without a username', { purpose: 'pull', value: pull({ [HOST]: { password: PULL, auth: 'eA==' } }) }, /username is missing/],
  ];
  for (const [name, rotation, problem] of refused) {
    it(`refuses ${name}, naming what is wrong without the value`, () => {
      const r = checkRotation(rotation, HOST);
      if (r.ok) throw new Error('accepted');
      expect(r.problem).toMatch(problem);
      for (const secret of [CONTROL, PULL, RELAY, 'new-control']) expect(r.problem).not.toContain(secret);
    });
  }
});
