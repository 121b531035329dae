// One pino logger per process. Credentials never reach a log line: every path
// that can carry one is redacted, whatever the component.
import { pino, type DestinationStream, type Logger } from 'pino';

export const REDACT_PATHS = [
  'token', 'joinToken', 'control', 'pull', 'relay', 'credential', 'password', 'secret', 'authorization',
  '*.token', '*.joinToken', '*.control', '*.pull', '*.relay', '*.credential', '*.password', '*.secret',
  '*.authorization', 'headers.authorization', 'req.headers.authorization', 'secretAccessKey', '*.secretAccessKey',
  'sessionToken', '*.sessionToken',
];

/** `destination`: where lines go instead of stdout (a test reads them back). */
export function createLogger(component: string, level = process.env.LOG_LEVEL ?? 'info', destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { component },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
