// What each intent type is (reconfigures, dryRun, action), as its step in ./intent-steps.js declares it: one list,
// read here by callers that describe intents without running them.

import { INTENT_STEPS } from './intent-steps.js';

export const INTENT_TYPES = Object.freeze(Object.fromEntries(Object.entries(INTENT_STEPS).map(([type, step]) => [
  type, Object.freeze({ reconfigures: step.reconfigures === true, dryRun: step.dryRun === true, action: step.action === true }),
])));

// Whether intents of this type have the property (false for a type not in the registry).
export const intentIs = (intentType, property) => INTENT_TYPES[intentType]?.[property] === true;

// A decision as callers see it: the reason and the actions it leads to (the intents that are actions), without the
// intents' internals.
export function describeDecision(decision) {
  const { intents, ...rest } = decision;
  const names = intents.filter((i) => intentIs(i.type, 'action'))
    .map((i) => (i.type === 'demote' ? `move-primaries-from-${i.node ? 'node' : 'server'}` : i.type));
  return { ...rest, actions: [...new Set(names)] };
}
