# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""make sliced-fleet: site.yml and readiness.yml as N slices, the way AWX slices a job, on a fleet of its own.

Boots a fleet of its own (TESTBED_PREFIX npsf, TESTBED_SUBNET 10.237, TESTBED_DIR .testbed-sliced; SLICED_FLEET_PREFIX,
SLICED_FLEET_SUBNET, SLICED_FLEET_DIR and SLICED_FLEET_NODES (4) change them; SLICED_FLEET_REUSE=1 uses a fleet already
up there and leaves it up), converges it with site.yml, then breaks two nodes so that the reports have something to
say: rows pending remapping on one GPU of one node (fault remapped-rows: readiness's gpu.health fails; site.yml has
nothing to change for it) and a hung node (fault ssh-hang: site.yml's summary and the readiness report name the SSH
connect limit). Then, with ansible-runner (its Python API, as AWX runs each job):

  1. unsliced: site.yml, then readiness.yml, on the whole inventory (extra variable awx_job_id, as an AWX job that is
     not in a workflow has): run-summary.json and the readiness report (run id: that job id);
  2. for N = 2 and 3: site.yml as N slices, then the merge playbook; readiness.yml as N slices, then the merge. Each
     slice is what AWX makes of a sliced job template (awx/main/models/inventory.py get_script_data and
     get_sliced_hosts): the inventory's hosts ordered by name, slice k of N gets hosts k-1, k-1+N, ...; every group
     and variable of the inventory; the extra variables awx_meta_vars gives a job of a workflow (awx_job_id and
     tower_job_id its own, awx_workflow_job_id and tower_workflow_job_id the slice workflow's, the same for every
     slice; awx_job_template_name, and awx_workflow_job_name equal to it, as AWX names a slice workflow after its job
     template; awx_job_launch_type workflow) plus the job template's (the report directory, shared; nodeprep_sliced
     for N = 2 only: for N = 3 the slices are told nothing and the collection detects them from AWX's names);
     no fact cache (AWX does not store facts of sliced jobs, ansible/awx#13863). The slices run at the same time.
     The merge node gets, as extra variables, the slices' set_stats artifacts merged in the order the slices finished
     (awx/main/models/workflow.py get_effective_artifacts), read from ansible-runner's playbook_on_stats event
     (artifact_data), as AWX reads them;
  3. checks: each slice had exactly its AWX share of hosts; the merged report.json, junit.xml, readiness.prom,
     report.html, report.txt, exit-status and run-summary.json equal the unsliced run's once the time of the run and
     the run id are set aside (and after sorting lines; whether they are equal without sorting is reported too); the
     run ids are the workflow job ids; the merge removed the slices' parts.

Exit 0 when every check passed. Heals the faults and takes the fleet down in every case (unless
SLICED_FLEET_REUSE=1). Run as root from the repository root; not part of `make test`. Prints the wall time of every
step and of the whole scenario.
"""

from __future__ import absolute_import, division, print_function

import copy
import json
import os
import re
import shutil
import sys
import threading
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleetlib  # noqa: E402

FLEET = fleetlib.ConvergedFleet('sliced-fleet', os.path.join(fleetlib.REPO, '.tmp', 'sliced-fleet'))
WORK = FLEET.work
INVENTORY = FLEET.inventory
PLAYBOOKS = fleetlib.PLAYBOOKS
# The files an unsliced run writes into the report directory, and what varies from run to run in each (the time of
# the run, the run id): set aside before the comparison.
COMPARED = ('report.json', 'junit.xml', 'readiness.prom', 'report.html', 'report.txt', 'exit-status',
            'run-summary.json')
say, check, timed, testbed, recap = FLEET.say, FLEET.check, FLEET.timed, FLEET.testbed, fleetlib.recap
inventory_hosts = fleetlib.inventory_hosts


# ------------------------------------------------------------------------------------------ AWX's slicing

def awx_slices(hosts, count):
    """AWX's split (get_sliced_hosts on hosts ordered by name): slice k (1..count) gets sorted[k-1::count]; never more
    slices than hosts (JobTemplate.get_effective_slice_ct)."""
    ordered = sorted(hosts)
    count = min(count, len(ordered))
    return [ordered[k::count] for k in range(count)]


def slice_inventory(inventory, keep):
    """The inventory with only the hosts of ``keep`` (every group and variable stays, as get_script_data gives)."""
    out = copy.deepcopy(inventory)

    def walk(group):
        hosts = (group or {}).get('hosts')
        if isinstance(hosts, dict):
            for name in list(hosts):
                if name not in keep:
                    del hosts[name]
        for child in ((group or {}).get('children') or {}).values():
            walk(child)
    walk(out.get('all'))
    return out


def awx_vars(job_id, template, workflow_job_id=None, workflow_name=None):
    """The extra variables awx_meta_vars gives a job (ids and names; the prefixes awx_ and tower_ carry the same
    values): its job template's name, and in a workflow the workflow job's id and name. The workflow job of a sliced
    launch has the job template's name (awx/main/models/jobs.py JobTemplate.create_unified_job)."""
    out = {}
    for prefix in ('awx', 'tower'):
        out['{0}_job_id'.format(prefix)] = job_id
        out['{0}_job_template_name'.format(prefix)] = template
        out['{0}_job_launch_type'.format(prefix)] = 'workflow' if workflow_job_id else 'manual'
        if workflow_job_id:
            out['{0}_workflow_job_id'.format(prefix)] = workflow_job_id
            out['{0}_workflow_job_name'.format(prefix)] = workflow_name or template
    return out


def runner_job(label, playbook, inventory, extravars):
    """One job through ansible-runner's Python API (as AWX's RunJob: no fact cache when fact storage is off).
    Returns a dict with rc, status, seconds, the recap and the set_stats artifacts."""
    import ansible_runner  # noqa: E402  (requirements/dev.txt; only this scenario needs it)
    private = os.path.join(WORK, 'runner', label)
    shutil.rmtree(private, ignore_errors=True)
    os.makedirs(os.path.join(private, 'inventory'))
    with open(os.path.join(private, 'inventory', 'hosts.yml'), 'w') as f:
        yaml.safe_dump(inventory, f, default_flow_style=False)
    envvars = FLEET.playbook_env(FLEET.control_dir(label))
    start = time.time()
    runner = ansible_runner.run(private_data_dir=private, playbook=os.path.join(PLAYBOOKS, playbook),
                                extravars=extravars, envvars=envvars, quiet=True, fact_cache_type='',
                                ident=label)
    seconds = time.time() - start
    artifacts, stdout = {}, runner.stdout.read()
    for event in runner.events:
        if event.get('event') == 'playbook_on_stats':
            artifacts = dict((event.get('event_data') or {}).get('artifact_data') or {})
    with open(os.path.join(WORK, 'logs', label + '.log'), 'w') as f:
        f.write(stdout)
    return {'label': label, 'rc': runner.rc, 'status': runner.status, 'seconds': seconds, 'finished': time.time(),
            'recap': recap(stdout), 'artifacts': artifacts, 'stdout': stdout}


def sliced_job(name, playbook, inventory, count, workflow_job_id, extravars):
    """A sliced job template launch: ``count`` slices at the same time; then the artifacts the next workflow node
    gets (the slices' set_stats data, merged in the order the slices finished)."""
    shares = awx_slices(inventory_hosts(inventory), count)
    jobs = []
    threads = []
    for k, share in enumerate(shares):
        job_id = workflow_job_id + 1 + k
        variables = dict(extravars, **awx_vars(job_id, 'nodeprep-' + name, workflow_job_id))
        label = '{0}-slice{1}of{2}'.format(name, k + 1, len(shares))

        def one(label, share, variables):
            jobs.append(dict(runner_job(label, playbook, slice_inventory(inventory, share), variables),
                             hosts=share))
        thread = threading.Thread(target=one, args=(label, share, variables))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    artifacts = {}
    for job in sorted(jobs, key=lambda item: item['finished']):
        artifacts.update(job['artifacts'])
    return jobs, artifacts


# ------------------------------------------------------------------------------------------ comparison

def normalized(name, text):
    """The file without what differs from run to run: the time of the run and the run id."""
    if name in ('report.json', 'run-summary.json'):
        data = json.loads(text)
        data.pop('generated', None)
        data.pop('run_id', None)
        return json.dumps(data, indent=1, sort_keys=True)
    if name == 'junit.xml':
        return re.sub(r' timestamp="[^"]*"', ' timestamp=""', text)
    if name == 'readiness.prom':
        return '\n'.join(line for line in text.splitlines()
                         if not line.startswith('nodeprep_readiness_last_run_timestamp_seconds'))
    if name == 'report.html':
        return re.sub(r'Generated [0-9TZ:-]+ ', 'Generated - ', text)
    return text


def compare(left_dir, right_dir, label):
    for name in COMPARED:
        paths = [os.path.join(left_dir, name), os.path.join(right_dir, name)]
        if not all(os.path.exists(path) for path in paths):
            missing = [path for path in paths if not os.path.exists(path)]
            check(False, '{0}: {1} in both'.format(label, name), 'missing: ' + ', '.join(missing))
            continue
        texts = []
        for path in paths:
            with open(path) as f:
                texts.append(normalized(name, f.read()))
        as_is = texts[0] == texts[1]
        sorted_equal = sorted(texts[0].splitlines()) == sorted(texts[1].splitlines())
        detail = ''
        if not sorted_equal:
            only = sorted(set(texts[0].splitlines()) ^ set(texts[1].splitlines()))
            detail = 'lines in one only: ' + ' | '.join(only[:6])
        check(sorted_equal, '{0}: {1} equals the unsliced run\'s (after sorting; {2})'.format(
            label, name, 'equal as is too' if as_is else 'differs in order only'), detail)


def run_id_of(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f).get('run_id')


# ------------------------------------------------------------------------------------------ the scenario

def scenario():
    with open(INVENTORY) as f:
        inventory = yaml.safe_load(f)
    hosts = sorted(inventory_hosts(inventory))
    sick_node, hung_node = hosts[0], hosts[-1]
    testbed('fault', sick_node, 'remapped-rows', '--gpu', '3', check=True)
    testbed('fault', hung_node, 'ssh-hang', check=True)
    say('faults: remapped-rows (GPU 3) on {0}, ssh-hang on {1}'.format(sick_node, hung_node))

    base = {'nodeprep_readiness_fail': False}
    unsliced = os.path.join(WORK, 'unsliced')
    start = time.time()
    site = runner_job('unsliced-site', 'site.yml', inventory,
                      dict(base, nodeprep_readiness_report_dir=unsliced, **awx_vars(900, 'nodeprep-site')))
    ready = runner_job('unsliced-readiness', 'readiness.yml', inventory,
                       dict(base, nodeprep_readiness_report_dir=unsliced, **awx_vars(901, 'nodeprep-readiness')))
    timed('unsliced site.yml + readiness.yml ({0:.0f} s + {1:.0f} s)'.format(site['seconds'], ready['seconds']),
          start)
    check(run_id_of(unsliced, 'run-summary.json') == '900' and run_id_of(unsliced, 'report.json') == '901',
          'unsliced: the run id is the AWX job id (900, 901)',
          '{0}, {1}'.format(run_id_of(unsliced, 'run-summary.json'), run_id_of(unsliced, 'report.json')))
    check(site['recap'].get(hung_node, {}).get('unreachable') == 1,
          'unsliced site.yml: the hung node is unreachable in the recap', str(site['recap'].get(hung_node)))
    with open(os.path.join(unsliced, 'report.json')) as f:
        report = json.load(f)
    failed = [c['id'] for c in report['hosts'][sick_node]['checks'] if c['status'] == 'fail']
    check(report['hosts'][sick_node]['status'] == 'not_ready' and failed == ['gpu.health'],
          'unsliced readiness: {0} is not ready (gpu.health fails)'.format(sick_node), str(failed))
    check(report['hosts'][hung_node]['status'] == 'unreachable' and 'ansible_ssh_timeout' in report['hosts'][
        hung_node]['msg'], 'unsliced readiness: {0} is unreachable, the SSH connect limit named'.format(hung_node),
        report['hosts'][hung_node]['msg'])
    with open(os.path.join(unsliced, 'run-summary.json')) as f:
        summary = json.load(f)
    limits = summary.get('limits', {}).get(hung_node) or []
    check(any(item.get('limit') == 'ssh_connect' and item.get('seconds') == 10 for item in limits),
          'unsliced run-summary.json names the hung node and its limit (SSH connect, 10 s)', json.dumps(limits))

    for count in (2, 3):
        folder = os.path.join(WORK, 'sliced-{0}'.format(count))
        shutil.rmtree(folder, ignore_errors=True)
        # N=2: the job template says nodeprep_sliced; N=3 leaves it out (a slice is detected from AWX's names).
        template_vars = dict(base, nodeprep_readiness_report_dir=folder)
        if count == 2:
            template_vars['nodeprep_sliced'] = True
        for kind, playbook, workflow in (('site', 'site.yml', 1000 * count + 100),
                                         ('readiness', 'readiness.yml', 1000 * count + 200)):
            start = time.time()
            jobs, artifacts = sliced_job('n{0}-{1}'.format(count, kind), playbook, inventory, count, workflow,
                                         template_vars)
            slices_s = time.time() - start
            want = awx_slices(hosts, count)
            check(sorted(sorted(job['recap']) for job in jobs) == sorted(sorted(share) for share in want),
                  'N={0} {1}: each slice ran on its AWX share of hosts {2}'.format(count, kind, want),
                  str([sorted(job['recap']) for job in jobs]))
            check(artifacts.get('nodeprep_run_id') == str(workflow),
                  'N={0} {1}: the slices left the run id {2} (the workflow job id) as the artifact'.format(
                      count, kind, workflow), str(artifacts))
            merge_start = time.time()
            merge = runner_job('n{0}-{1}-merge'.format(count, kind), 'merge_slices.yml', inventory,
                               dict(base, nodeprep_readiness_report_dir=folder, **dict(
                                   artifacts, **awx_vars(workflow + 50, 'nodeprep-merge', workflow - 50,
                                                         'nodeprep-hourly'))))
            check(merge['rc'] == 0, 'N={0} {1}: the merge playbook succeeded'.format(count, kind),
                  merge['stdout'][-2000:])
            timed('N={0} {1}: {2} slices at once {3:.0f} s (each {4}), merge {5:.0f} s'.format(
                count, kind, len(jobs), slices_s, ', '.join('{0:.0f} s'.format(job['seconds'])
                                                            for job in sorted(jobs, key=lambda j: j['label'])),
                time.time() - merge_start), start)
            check(not os.path.exists(os.path.join(folder, 'slices', str(workflow))),
                  'N={0} {1}: the merge removed the slices\' parts'.format(count, kind))
        check(run_id_of(folder, 'run-summary.json') == str(1000 * count + 100)
              and run_id_of(folder, 'report.json') == str(1000 * count + 200),
              'N={0}: the merged files carry the workflow job ids as run id'.format(count))
        compare(unsliced, folder, 'N={0}'.format(count))


def report(total):
    timed('sliced-fleet, all steps', total)
    for label, seconds in FLEET.times:
        say('  {0:7.0f} s  {1}'.format(seconds, label))
    say('{0}: {1}'.format('FAILED' if FLEET.failed else 'PASSED', '; '.join(FLEET.failed) if FLEET.failed
                          else 'every check'))


def main():
    return FLEET.run('sliced-fleet', scenario, report)


if __name__ == '__main__':
    sys.exit(main())
