// The eviction admission webhook: the API server sends an AdmissionReview (admission.k8s.io/v1) for every
// CREATE of pods/eviction in the RethinkDB namespace (deploy/k8s/manager-webhook.yaml) and admits the eviction
// only if the answer allows it. A refusal is a 429, as a PodDisruptionBudget's: kubectl drain and the cluster
// autoscaler retry it. Served over TLS on its own port (src/webhook-server.js), never on the API port.

import express from 'express';

const API_VERSION = 'admission.k8s.io/v1';

// relayReview(review): resolves with the leader's answer when this replica must not review it itself (a follower),
// null when it reviews it; rejects when a follower cannot reach the leader.
export function createWebhookApp({ maintenance, work, logger, relayReview = async () => null }) {
  const log = logger.child({ module: 'webhook' });
  const app = express();
  app.disable('x-powered-by');
  app.use(express.json({ limit: '1mb' }));

  app.post('/v1/admission/eviction', async (req, res) => {
    const request = req.body?.request;
    if (req.body?.kind !== 'AdmissionReview' || typeof request?.uid !== 'string') {
      res.status(400).json({ error: 'BAD_REQUEST', message: 'expected an admission.k8s.io/v1 AdmissionReview with request.uid' });
      return;
    }
    const reply = (response) => res.json({ apiVersion: API_VERSION, kind: 'AdmissionReview', response: { uid: request.uid, ...response } });
    if (!isEviction(request)) {
      reply({ allowed: true });
      return;
    }
    const ask = {
      pod: request.name ?? request.object?.metadata?.name, namespace: request.namespace ?? request.object?.metadata?.namespace,
      dryRun: request.dryRun === true, user: request.userInfo?.username ?? null,
    };
    try {
      // A follower passes the review on to the leader (never a review passed on already) and answers with its answer.
      const relayedBy = req.headers['x-rethinkdb-manager-relayed-by'];
      if (relayedBy) log.info({ pod: ask.pod, relayedBy }, 'eviction review passed on by a follower');
      const fromLeader = relayedBy ? null : await relayReview(req.body);
      if (fromLeader && !fromLeader.response) throw new Error("the leader's webhook answered without a response");
      if (fromLeader) {
        reply({ ...fromLeader.response, uid: request.uid });
        return;
      }
      const answer = await work.track(() => maintenance.reviewEviction(ask));
      reply({
        allowed: answer.allowed,
        ...(answer.allowed ? {} : { status: { code: answer.code, reason: 'TooManyRequests', message: answer.message } }),
        ...(answer.warnings?.length ? { warnings: answer.warnings.map((w) => w.slice(0, 250)) } : {}),
      });
    } catch (err) {
      // Starting (the persisted state not loaded yet), shutting down, or a follower that cannot reach the leader: the
      // manager cannot act, so the eviction goes ahead as if the manager were down (the webhook's failurePolicy
      // Ignore), with a warning that says so.
      const message = `rethinkdb-k8s-manager did not act: ${err.message}; the eviction goes ahead without demoting primaries first`;
      log.warn({ pod: ask.pod, err: err.message }, 'eviction allowed: the manager takes no work now');
      reply({ allowed: true, warnings: [message.slice(0, 250)] });
    }
  });

  app.use((req, res) => res.status(404).json({ error: 'NOT_FOUND', message: `no webhook at ${req.method} ${req.path}` }));
  // A body that is not JSON (express.json's error) is the caller's mistake.
  app.use((err, req, res, _next) => {
    res.status(err.status ?? 500).json({ error: err.status === 400 ? 'BAD_REQUEST' : 'INTERNAL', message: err.message });
  });
  return app;
}

function isEviction(request) {
  return request.operation === 'CREATE' && request.resource?.resource === 'pods' && request.subResource === 'eviction';
}
