// A real HTTP server that answers Kubernetes API paths with recorded responses (../shared/fixtures/kubernetes-1.34),
// and records every request it receives, so tests run the real @kubernetes/client-node against it.

import { createServer } from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';
import { loadKubeFixture } from './fixtures.js';

export async function startFakeKubeApi(routes) {
  const requests = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      const url = new URL(req.url, 'http://localhost');
      const entry = { method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), contentType: req.headers['content-type'] ?? null, authorization: req.headers.authorization ?? null, body: body ? JSON.parse(body) : null };
      requests.push(entry);
      const route = routes.find((r) => r.method === req.method && (typeof r.path === 'string' ? r.path === url.pathname : r.path.test(url.pathname)) && (!r.query || Object.entries(r.query).every(([k, v]) => url.searchParams.get(k) === v)));
      const answer = route ? (typeof route.answer === 'function' ? route.answer(entry) : route.answer) : { status: 404, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: `no fake route for ${req.method} ${url.pathname}`, reason: 'NotFound', code: 404 } };
      if (typeof answer.body === 'string') {
        res.writeHead(answer.status, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(answer.body);
      } else {
        res.writeHead(answer.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(answer.body));
      }
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'fake', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'manager', token: 'test-token' }],
    contexts: [{ name: 'fake', cluster: 'fake', user: 'manager', namespace: 'rethinkdb' }],
    currentContext: 'fake',
  });
  return { kubeConfig, requests, port, close: () => new Promise((resolve) => server.close(resolve)) };
}

const NS = '/api/v1/namespaces/rethinkdb';

// The recorded API, path by path.
export function recordedKubeRoutes({ metricsAvailable = true } = {}) {
  return [
    { method: 'GET', path: `${NS}/pods`, query: { fieldSelector: 'spec.nodeName=node-1' }, answer: loadKubeFixture('pod-list-on-node.json') },
    { method: 'GET', path: `${NS}/pods`, answer: loadKubeFixture('pod-list-all.json') },
    { method: 'GET', path: `${NS}/pods/rethinkdb-2`, answer: loadKubeFixture('pod-get.json') },
    { method: 'GET', path: /^\/api\/v1\/namespaces\/rethinkdb\/pods\/[^/]+$/, answer: loadKubeFixture('pod-get-missing.json') },
    { method: 'GET', path: '/api/v1/nodes/node-1', answer: loadKubeFixture('node-get.json') },
    { method: 'GET', path: '/apis/apps/v1/namespaces/rethinkdb/statefulsets/rethinkdb/scale', answer: loadKubeFixture('statefulset-scale-get.json') },
    { method: 'PATCH', path: '/apis/apps/v1/namespaces/rethinkdb/statefulsets/rethinkdb/scale', answer: loadKubeFixture('statefulset-scale-patch.json') },
    { method: 'POST', path: `${NS}/events`, answer: loadKubeFixture('event-create.json') },
    { method: 'PATCH', path: `${NS}/pods/rethinkdb-2`, answer: loadKubeFixture('pod-annotate-patch.json') },
    { method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews', answer: tokenReviewAnswer },
    {
      method: 'GET', path: '/apis/metrics.k8s.io/v1beta1/namespaces/rethinkdb/pods',
      answer: metricsAvailable ? loadKubeFixture('pod-metrics-list.example.json') : loadKubeFixture('metrics-api-absent.json'),
    },
  ];
}

// The recorded TokenReview verdicts: the valid token for audience rethinkdb-manager, the same token for another
// audience, and garbage.
function tokenReviewAnswer({ body }) {
  const valid = loadKubeFixture('token-review-valid.json');
  if (body.spec.token !== valid.body.spec.token) return loadKubeFixture('token-review-garbage.json');
  return (body.spec.audiences ?? []).includes('rethinkdb-manager') ? valid : loadKubeFixture('token-review-other-audience.json');
}

export function recordedValidToken() {
  return loadKubeFixture('token-review-valid.json').body.spec.token;
}
