// The chart value commonLabels (runtime config pods.commonLabels), for a policy
// engine that requires labels or for cost allocation, on every object the agent
// and the controller create, as the chart puts them on every object it renders.
// An object's own labels win on a clash; the chart refuses commonLabels keys it
// sets itself (lib/chart-knobs.ts), so there is none but by hand.

/** `own` over the commonLabels (absent in a config from a chart before they existed). */
export const withCommonLabels = (own: Readonly<Record<string, string>>, common: Readonly<Record<string, string>> | undefined): Record<string, string> => ({ ...common, ...own });
