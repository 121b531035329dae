import { describe, expect, it } from 'vitest';
import { agentSkew, chartUpgrade, cliSkew, parseVersion } from './version-skew.ts';

describe('parseVersion', () => {
  it('reads MAJOR.MINOR.PATCH with a pre-release and build', () => {
    expect(parseVersion('1.2.3')).toEqual({ major: 1, minor: 2, patch: 3, prerelease: '' });
    expect(parseVersion('v0.1.0-git-6054ebe+x')).toEqual({ major: 0, minor: 1, patch: 0, prerelease: 'git-6054ebe' });
  });
  it('refuses what is not semver', () => {
    for (const v of ['', 'dev', '1.2', '01.2.3', '1.2.3.4']) expect(parseVersion(v), v).toBeUndefined();
  });
});

describe('agentSkew: a control plane accepts agents of its major, at most 2 minors older, never newer', () => {
  it.each([
    ['1.5.0', '1.5.9', 'supported'],
    ['1.5.0', '1.5.0-rc.1', 'supported'],
    ['1.5.2', '1.4.0', 'supported'],
    ['1.5.0', '1.3.7', 'oldest'],
    ['1.5.0', '1.2.0', 'unsupported'],
    ['1.5.0', '1.6.0', 'unsupported'],
    ['1.5.0', '2.5.0', 'unsupported'],
    ['2.0.0', '1.9.0', 'unsupported'],
    ['0.1.0', '0.1.0-git-6054ebe', 'supported'],
    ['0.1.0', '0.0.3', 'supported'],
    ['0.1.0', '', 'unsupported'],
    ['0.1.0', 'dev', 'unsupported'],
  ])('control plane %s, agent %s: %s', (cp, agent, verdict) => {
    expect(agentSkew(cp, agent).verdict).toBe(verdict);
  });

  it('says in one line what happened, why and what to do', () => {
    const { line } = agentSkew('1.5.0', '1.2.4');
    expect(line).not.toContain('\n');
    expect(line).toMatch(/^agent 1\.2\.4 refused: it is 3 minor versions older than the control plane/);
    expect(line).toContain('accepts agents 1.3 to 1.5');
    expect(line).toContain('helm upgrade rlmesh <chart> --version 1.4.x --reuse-values');
    expect(agentSkew('1.5.0', '1.6.1').line).toMatch(/newer than the control plane.*--version 1\.5\.x/);
    expect(agentSkew('1.5.0', '1.3.0').line).toMatch(/next minor version will refuse it/);
    expect(agentSkew('0.1.0', 'dev').line).toMatch(/not a version MAJOR\.MINOR\.PATCH.*accepts agents 0\.0 to 0\.1/);
  });
});

describe('chartUpgrade: forward within a major, at most 2 minors at a time; back only within a line', () => {
  it.each([
    ['1.2.0', '1.2.5', 'supported'],
    ['1.2.5', '1.2.0', 'supported'],
    ['1.2.0', '1.4.0', 'supported'],
    ['1.2.0', '1.5.0', 'unsupported'],
    ['1.4.0', '1.3.0', 'unsupported'],
    ['1.9.0', '2.0.0', 'unsupported'],
    ['0.1.0-git-6054ebe', '0.1.0', 'supported'],
    ['latest', '0.1.0', 'unsupported'],
  ])('%s → %s: %s', (from, to, verdict) => {
    expect(chartUpgrade(from, to).verdict).toBe(verdict);
  });
  it('names the step to take first', () => {
    expect(chartUpgrade('1.2.0', '1.6.0').line).toContain('upgrade to 1.4.x first');
  });
});

describe('cliSkew', () => {
  it('accepts charts within 2 minors either way', () => {
    expect(cliSkew('1.3.0', '1.1.0').verdict).toBe('supported');
    expect(cliSkew('1.3.0', '1.5.2').verdict).toBe('supported');
    expect(cliSkew('1.3.0', '1.6.0').verdict).toBe('unsupported');
    expect(cliSkew('1.3.0', '2.3.0').line).toMatch(/install the CLI of the chart's release \(2\.3\)/);
  });
});
