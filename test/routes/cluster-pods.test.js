// GET /v1/cluster names where each RethinkDB pod runs (from Kubernetes); Kubernetes failing costs only that part.

import request from 'supertest';
import { createSandboxHarness } from '../helpers/harness.js';

describe('GET /v1/cluster: pods and nodes', () => {
  test('when Kubernetes answers, then every pod is listed with its node and the hostname its server has', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).get('/v1/cluster');
    expect(res.status).toBe(200);
    expect(res.body.pods).toEqual((await h.kube.listRethinkDbPods()).map((p) => expect.objectContaining({ pod: p.name, node: p.nodeName, hostname: p.hostname })));
    const hostnames = res.body.servers.map((s) => s.hostname).sort();
    expect(res.body.pods.map((p) => p.hostname).sort()).toEqual(hostnames);
  });

  test('when listing pods fails, then the cluster view still answers 200, with pods null and the reason', async () => {
    const h = createSandboxHarness();
    h.kube.listRethinkDbPods = async () => { throw new Error('Kubernetes API did not answer "list pods" within 5000 ms'); };
    const res = await request(h.app).get('/v1/cluster');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ pods: null, podsError: expect.stringMatching(/did not answer/) });
    expect(res.body.servers).toHaveLength(4);
  });
});
