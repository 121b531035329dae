// One pino logger per process. Credentials never reach a log line: every path
// that can carry one is redacted, whatever the component.
import { pino, type DestinationStream, type Logger } from 'pino';

export const REDACT_PATHS = [
  'token', 'joinToken', 'control', 'pull', 'relay', 'credential', 'password', 'secret', 'authorization',
  '*.token', '*.joinToken', '*.control', '*.pull', '*.relay', '*.credential', '*.password', '*.secret',
  '*.authorization', 'headers.authorization', 'req.headers.authorization', 'secretAccessKey', '*.secretAccessKey',
  'sessionToken', '*.sessionToken', 'secretEnv', '*.secretEnv',
];

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const OWN_FIELDS = new Set(['time', 'level', 'component', 'msg', 'pid', 'hostname']);
const logfmtValue = (v: unknown): string => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === '' || /[\s"=\\]/.test(s) ? JSON.stringify(s) : s;
};

/**
 * One pino JSON line as text (chart value logging.format=text): time, level, component,
 * message, then the other fields as key=value (logfmt; objects as JSON). Redaction has
 * already happened: this sees what the JSON line holds.
 */
export function textLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const fields = Object.entries(o).filter(([k]) => !OWN_FIELDS.has(k)).map(([k, v]) => `${k}=${logfmtValue(v)}`);
  const head = `${String(o.time ?? '')} ${(LEVEL_NAMES[o.level as number] ?? String(o.level)).padEnd(5)} ${String(o.component ?? '')}: ${String(o.msg ?? '')}`;
  return `${[head, ...fields].join(' ')}\n`;
}

/** A destination writing textLine() of each line to `out`. */
export function textDestination(out: { write(s: string): unknown } = process.stdout): DestinationStream {
  return { write: (line: string) => void out.write(textLine(line)) };
}

/**
 * `destination`: where lines go instead of stdout (a test reads them back). LOG_LEVEL and
 * LOG_FORMAT (json or text) are the chart's logging.level and logging.format.
 */
export function createLogger(component: string, level = process.env.LOG_LEVEL ?? 'info', destination?: DestinationStream, format = process.env.LOG_FORMAT ?? 'json'): Logger {
  const options = {
    level,
    base: { component },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (format === 'text') return pino(options, textDestination(destination ?? process.stdout));
  return destination ? pino(options, destination) : pino(options);
}
