import { describe, expect, it } from 'vitest';
import { createLogger, textLine } from './logger.ts';

const collect = () => {
  const lines: string[] = [];
  return { lines, out: { write: (s: string) => void lines.push(s) } };
};

describe('log format (chart value logging.format)', () => {
  it('text: time, level, component and message, then the fields as key=value, still redacted', () => {
    const { lines, out } = collect();
    const log = createLogger('agent', 'info', out, 'text');
    log.info({ node: 'n1', reason: 'two words', password: 'hunter2', nested: { a: 1 } }, 'node reported');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z INFO  agent: node reported node=n1 reason="two words" password=\[redacted\] nested="\{\\"a\\":1\}"\n$/);
    expect(lines[0]).not.toContain('hunter2');
  });

  it('json stays one JSON object a line, and the level drops what is below it', () => {
    const { lines, out } = collect();
    const log = createLogger('controller', 'warn', out, 'json');
    log.info('hidden');
    log.warn({ n: 1 }, 'shown');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 40, component: 'controller', msg: 'shown', n: 1 });
  });

  it('a line that is not JSON passes through', () => {
    expect(textLine('plain')).toBe('plain');
  });
});
