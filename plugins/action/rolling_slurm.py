# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of gpufleet.nodeprep.rolling_slurm: the Slurm backend of the rolling maintenance run and of readiness's
Slurm verdict (state, lock, unlock, drain, set_reason, wait_empty, resume, reboot, wait_reboot). Every Slurm command
is an argv run by ansible.builtin.command on the host the task runs on (delegate_to the Slurm controller); a poll of
any number of nodes is one scontrol and one squeue over their hostlist; the decisions are
plugins/module_utils/rules/_rolling.py. Documentation: plugins/modules/rolling_slurm.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import os
import socket
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R

OPS = ('state', 'lock', 'unlock', 'drain', 'set_reason', 'wait_empty', 'resume', 'reboot', 'wait_reboot', 'health')
WRITES = ('drain', 'set_reason', 'resume', 'reboot')
# The answer of an operation on no node (or a write in check mode): every key the playbook reads, empty.
EMPTY = {
    'state': {'records': {}, 'config': {}, 'partitions': {}, 'jobs': {}},
    'drain': {},
    'set_reason': {'updated': [], 'not_ours': []},
    'wait_empty': {'empty': [], 'busy': {}, 'nodes_state': {}, 'timed_out': False, 'not_ours': [], 'polls': 0},
    'resume': {'resumed': [], 'back': [], 'already': [], 'not_back': {}, 'not_ours': {}},
    'reboot': {'asked': [], 'steps': {}},
    'wait_reboot': {'rebooted': [], 'not_rebooted': {}, 'steps': {}},
    'health': {'actions': {}, 'drained': [], 'updated': [], 'resumed': [], 'skipped': {}, 'unknown': []},
}


def process_alive(pid):
    """Whether process ``pid`` of this controller still runs an Ansible command (a reused pid does not count)."""
    try:
        with open('/proc/{0}/cmdline'.format(int(pid)), 'rb') as handle:
            argv = handle.read().split(b'\0')
    except (IOError, OSError, ValueError):
        return False
    return any(b'ansible' in os.path.basename(arg) for arg in argv[:3])


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('op', 'nodes', 'reason', 'reasons', 'timeout', 'interval', 'resume_timeout', 'bin_dir',
                             'min_available', 'held', 'run_id', 'verdicts'))

    def _run(self, argv, task_vars, check=True):
        """One Slurm command (argv, R.SLURM_ENV) on the task's host; its stdout, or a failure naming the command.
        With ``check`` False: (rc, stdout, stderr)."""
        full = ['env'] + list(R.SLURM_ENV) + list(argv)
        first = len(R.SLURM_ENV) + 1
        if self._bin_dir and argv[0] in ('scontrol', 'squeue'):
            full[first] = self._bin_dir.rstrip('/') + '/' + full[first]
        result = self._execute_module(module_name='ansible.builtin.command', module_args={'argv': full},
                                      task_vars=task_vars)
        self._commands.append(' '.join(argv))
        if not check:
            return result.get('rc', 1 if result.get('failed') else 0), result.get('stdout', ''), \
                (result.get('stderr') or result.get('msg') or '').strip()
        if result.get('failed') or result.get('rc', 0) != 0:
            raise AnsibleActionFail('{0}: {1} failed (rc={2}): {3}'.format(
                self._host_label, ' '.join(argv), result.get('rc'),
                (result.get('stderr') or result.get('msg') or '').strip()[-500:]))
        return result.get('stdout', '')

    def _records(self, task_vars, nodes=None):
        """``scontrol show node -o`` of ``nodes`` (one call over their hostlist), or of every node."""
        return R.parse_nodes(self._run(['scontrol', 'show', 'node', '-o'] + ([R.hostlist(nodes)] if nodes else []),
                                       task_vars))

    def _jobs(self, nodes, task_vars):
        """{node: active job ids} of ``nodes``, from one squeue over their hostlist."""
        if not nodes:
            return {}
        text = self._run(['squeue', '-h', '-w', R.hostlist(nodes), '-o', R.SQUEUE_FORMAT], task_vars)
        return R.jobs_by_node(R.parse_jobs(text), nodes)

    def _poll(self, nodes, task_vars):
        """One poll of ``nodes``: R.poll_commands (one scontrol, one squeue), their records and jobs."""
        scontrol, squeue = R.poll_commands(nodes)
        records = R.parse_nodes(self._run(scontrol, task_vars))
        self._known(nodes, records)
        jobs = R.jobs_by_node(R.parse_jobs(self._run(squeue, task_vars)), nodes)
        return records, jobs

    def _known(self, nodes, records):
        missing = [n for n in nodes if n not in records]
        if missing:
            raise AnsibleActionFail('{0}: Slurm does not know node(s) {1}; it knows {2}'.format(
                self._host_label, ', '.join(missing), ', '.join(sorted(records)) or 'none'))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=dict(
            op=dict(type='str', required=True, choices=list(OPS)),
            nodes=dict(type='list', elements='str', default=[]),
            reason=dict(type='str'),
            reasons=dict(type='dict', default={}),
            timeout=dict(type='int', default=3600),
            interval=dict(type='int', default=5),
            resume_timeout=dict(type='int', default=60),
            bin_dir=dict(type='str', default=''),
            min_available=dict(type='int', default=0),
            held=dict(type='list', elements='str', default=[]),
            run_id=dict(type='str'),
            verdicts=dict(type='dict', default={}),
        ))
        self._commands = []
        self._bin_dir = args['bin_dir']
        self._host_label = 'Slurm controller {0}'.format(task_vars.get('inventory_hostname', '?'))
        op, nodes = args['op'], args['nodes']
        result.update({'changed': False, 'op': op, 'nodes': nodes, 'commands': self._commands})
        if op == 'set_reason':
            reasons = dict((n, args['reasons'].get(n) or args['reason']) for n in nodes)
            if not all(reasons.values()):
                raise AnsibleActionFail('op=set_reason needs a reason or reasons for {0}'.format(
                    ', '.join(n for n, r in reasons.items() if not r)))
            for name, reason in reasons.items():
                if R.parse_reason(reason) is None:
                    raise AnsibleActionFail('{0}: reason {1!r} is not one of ours (nodeprep:<run id>:<phase>)'.format(
                        name, reason))
            args['reasons'] = reasons
        if op == 'reboot' and (R.parse_reason(args['reason'] or '') or {}).get('phase') != 'reboot':
            raise AnsibleActionFail('op=reboot needs the reason nodeprep:<run id>:reboot, got {0!r}'.format(
                args['reason']))
        if op == 'drain' and R.parse_reason(args['reason'] or '') is None:
            raise AnsibleActionFail('op=drain needs a reason of ours (nodeprep:<run id>:<phase>), got {0!r}'.format(
                args['reason']))
        if op in ('lock', 'unlock'):
            try:
                R.check_run_id(args['run_id'])
            except R.RollingError as exc:
                raise AnsibleActionFail('op={0}: {1}'.format(op, to_native(exc)))
        if op in EMPTY:
            result.update(copy.deepcopy(EMPTY[op]))
        if op == 'health':
            if not args['verdicts']:
                args['verdicts'] = self._readiness_verdicts(nodes, task_vars)
            nodes = sorted(args['verdicts'])
            result['nodes'] = nodes
        if op in EMPTY and op != 'state' and not nodes:
            return result
        if op in WRITES and self._task.check_mode:
            result.update({'changed': True, 'msg': 'check mode: {0} of {1} not done'.format(op, ', '.join(nodes))})
            return result
        try:
            getattr(self, '_op_' + op)(args, nodes, task_vars, result)
        except R.RollingError as exc:
            raise AnsibleActionFail('{0}: {1}'.format(self._host_label, to_native(exc)))
        return result

    def _op_state(self, args, nodes, task_vars, result):
        """Every node's record (partitions, min_available), the config, the partitions, and one squeue over the
        nodes asked about: 4 Slurm calls whatever the number of nodes."""
        records = self._records(task_vars)
        config = R.parse_config(self._run(['scontrol', 'show', 'config'], task_vars))
        partitions = R.parse_partitions(self._run(['scontrol', 'show', 'partition', '-o'], task_vars))
        jobs = self._jobs([n for n in nodes if n in records], task_vars)
        result.update({'records': records, 'config': dict((k, config[k]) for k in config
                                                          if k in ('ResumeTimeout', 'ReturnToService',
                                                                   'SLURM_VERSION', 'RebootProgram',
                                                                   'SlurmdTimeout', 'ClusterName',
                                                                   'AccountingStorageType')),
                       'partitions': partitions, 'jobs': jobs})

    def _lock_target(self, task_vars):
        config = R.parse_config(self._run(['scontrol', 'show', 'config'], task_vars))
        return R.lock_path(config.get('ClusterName'))

    def _read_lock(self, path, task_vars):
        rc, out, _err = self._run(['readlink', path], task_vars, check=False)
        return R.parse_lock(out) if rc == 0 else None, out.strip() if rc == 0 else ''

    def _op_lock(self, args, nodes, task_vars, result):
        """Take the cluster's lock for run ``run_id`` (a link on the Slurm controller whose target names the run,
        this controller and its ansible-playbook process): taken when free, kept when this run id holds it, taken
        over when its holder is a run of this controller that is gone, else refused naming the holder."""
        path = self._lock_target(task_vars)
        me = socket.gethostname()
        mine = R.format_lock(args['run_id'], me, os.getppid(), time.time())
        held, raw = self._read_lock(path, task_vars)
        if raw and held is None:
            raise AnsibleActionFail('{0}: {1} exists but is not a lock of ours ({2!r}); remove it if no rolling run '
                                    'uses it'.format(self._host_label, path, raw))
        alive = process_alive(held['pid']) if held and held['controller'] == me else None
        decision = R.lock_decision(held, args['run_id'], me, alive)
        result.update({'lock': path, 'holder': held, 'decision': decision})
        if decision == 'refuse':
            raise AnsibleActionFail(
                '{0}: run {1} holds the lock of this cluster ({2} -> {3}: controller {4}, process {5}, since {6}); '
                'a second rolling run would take its nodes. Wait for it to end; if it is gone, rerun with '
                'nodeprep_rolling_run_id={1} or remove {2} on {7}'.format(
                    self._host_label, held['run_id'], path, raw, held['controller'], held['pid'],
                    time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(held['since'])),
                    task_vars.get('inventory_hostname', 'the Slurm controller')))
        if self._task.check_mode:
            result['msg'] = 'check mode: lock {0} not {1}'.format(path, 'taken' if decision == 'take' else 'changed')
            return
        if decision == 'ours':
            return
        self._run(['mkdir', '-p', R.LOCK_DIR], task_vars)
        if decision == 'take':
            rc, _out, err = self._run(['ln', '-s', mine, path], task_vars, check=False)
        else:
            tmp = '{0}.{1}'.format(path, args['run_id'])
            self._run(['ln', '-sfn', mine, tmp], task_vars)
            rc, _out, err = self._run(['mv', '-T', tmp, path], task_vars, check=False)
        got, raw = self._read_lock(path, task_vars)
        if rc != 0 or got is None or got['run_id'] != args['run_id']:
            raise AnsibleActionFail('{0}: could not take the lock {1} for run {2}: it now names {3!r} ({4})'.format(
                self._host_label, path, args['run_id'], raw, err or 'another run took it first'))
        result.update({'changed': True, 'holder': got})

    def _op_unlock(self, args, nodes, task_vars, result):
        """Give the lock back when this run holds it; a lock of another run is left alone."""
        path = self._lock_target(task_vars)
        held, raw = self._read_lock(path, task_vars)
        result.update({'lock': path, 'holder': held})
        if held is None or held['run_id'] != args['run_id']:
            result['msg'] = 'lock {0} is not held by run {1} ({2}): left alone'.format(
                path, args['run_id'], raw or 'none')
            return
        if self._task.check_mode:
            result['msg'] = 'check mode: lock {0} not removed'.format(path)
            return
        self._run(['rm', '-f', path], task_vars)
        result['changed'] = True

    def _op_drain(self, args, nodes, task_vars, result):
        """Drain ``nodes`` in one scontrol update, after checking on Slurm's answer of the moment that every
        partition they touch keeps ``min_available`` usable nodes outside them."""
        records = self._records(task_vars)
        self._known(nodes, records)
        # Never a node that is someone else's, nor one already ours (never drained twice).
        refused = [n for n in nodes if R.node_status(records[n])['held'] or R.node_status(records[n])['ours']]
        if refused:
            raise AnsibleActionFail('{0}: will not drain {1}: already drained, down or with a reason ({2})'.format(
                self._host_label, ', '.join(refused), '; '.join('{0} State={1} Reason={2}'.format(
                    n, records[n].get('State'), records[n].get('Reason', '')) for n in refused)))
        problems = R.drain_allowed(records, nodes, args['min_available'], label='draining')
        if problems:
            raise AnsibleActionFail('{0}: will not drain: {1}'.format(self._host_label, '; '.join(problems)))
        self._run(['scontrol', 'update', 'nodename=' + R.hostlist(nodes), 'state=DRAIN',
                   'reason=' + args['reason']], task_vars)
        result['changed'] = True

    def _op_set_reason(self, args, nodes, task_vars, result):
        records = self._records(task_vars, nodes)
        self._known(nodes, records)
        # Only a node whose current reason is ours gets a new one: an admin's reason is never overwritten.
        mine = [n for n in nodes if R.node_status(records[n])['ours'] is not None]
        skipped = [n for n in nodes if n not in mine]
        by_reason = {}
        for name in mine:
            if R.strip_reason(records[name].get('Reason', '')) != args['reasons'][name]:
                by_reason.setdefault(args['reasons'][name], []).append(name)
        for reason in sorted(by_reason):
            self._run(['scontrol', 'update', 'nodename=' + R.hostlist(by_reason[reason]), 'reason=' + reason],
                      task_vars)
            result['changed'] = True
        result.update({'updated': mine, 'not_ours': skipped})

    def _op_wait_empty(self, args, nodes, task_vars, result):
        """Poll (one scontrol and one squeue for all of ``nodes``) until each is empty (R.node_empty) or
        O(timeout) passed. ``held``: the nodes worked on without being ours (include_held); any other node whose
        reason is no longer ours was taken over by someone during the wait (``not_ours``)."""
        deadline = time.time() + args['timeout']
        state = {}
        polls = 0
        while True:
            records, jobs = self._poll(nodes, task_vars)
            polls += 1
            for node in nodes:
                status = R.node_status(records[node])
                state[node] = {'jobs': jobs[node], 'drained': R.node_empty(records[node], jobs[node]),
                               'state': status['state'], 'reason': status['reason']}
            if all(s['drained'] for s in state.values()) or time.time() >= deadline:
                break
            time.sleep(max(1, args['interval']))
        lost = sorted(n for n in nodes if n not in args['held'] and R.node_status(records[n])['ours'] is None)
        result.update({'empty': sorted(n for n, s in state.items() if s['drained']),
                       'busy': dict((n, s['jobs']) for n, s in state.items() if not s['drained']),
                       'nodes_state': state, 'timed_out': not all(s['drained'] for s in state.values()),
                       'not_ours': lost, 'polls': polls})

    def _op_resume(self, args, nodes, task_vars, result):
        """Resume the nodes whose reason is ours (and in force); confirm they take jobs again. A node already in
        service counts as back; a node someone else holds is never resumed (``not_ours``)."""
        records = self._records(task_vars, nodes)
        self._known(nodes, records)
        mine = [n for n in nodes if R.may_resume(records[n])]
        already = [n for n in nodes if n not in mine and R.back_in_service(records[n])]
        refused = dict((n, 'State={0} Reason={1}'.format(records[n].get('State'), records[n].get('Reason', '')))
                       for n in nodes if n not in mine and n not in already)
        if mine:
            self._run(['scontrol', 'update', 'nodename=' + R.hostlist(mine), 'state=RESUME'], task_vars)
            result['changed'] = True
        deadline = time.time() + args['resume_timeout']
        back = []
        while mine:
            records = self._records(task_vars, mine)
            back = [n for n in mine if R.back_in_service(records[n])]
            if len(back) == len(mine) or time.time() >= deadline:
                break
            time.sleep(max(1, min(args['interval'], 2)))
        result.update({'resumed': mine, 'back': sorted(back + already), 'already': already, 'not_back': dict(
            (n, records[n].get('State')) for n in mine if n not in back), 'not_ours': refused})

    def _op_reboot(self, args, nodes, task_vars, result):
        """scontrol reboot nextstate=DOWN reason=<ours> for the nodes of ours whose reboot_step is 'request'; a reboot
        already asked or issued is waited for (wait_reboot), never asked twice."""
        records = self._records(task_vars, nodes)
        self._known(nodes, records)
        not_ours = [n for n in nodes if R.node_status(records[n])['ours'] is None]
        if not_ours:
            raise AnsibleActionFail('{0}: will not ask Slurm to reboot {1}: their reason is not ours ({2})'.format(
                self._host_label, ', '.join(not_ours), '; '.join('{0} State={1} Reason={2}'.format(
                    n, records[n].get('State'), records[n].get('Reason', '')) for n in not_ours)))
        steps = dict((n, R.reboot_step(records[n], True)) for n in nodes)
        ask = [n for n in nodes if steps[n] == 'request']
        if ask:
            self._run(['scontrol', 'reboot', 'nextstate=DOWN', 'reason=' + args['reason'], R.hostlist(ask)],
                      task_vars)
            result['changed'] = True
        result.update({'asked': ask, 'steps': steps})

    def _op_wait_reboot(self, args, nodes, task_vars, result):
        """Poll (one scontrol over the hostlist) until each node's Slurm reboot is complete (it registered again:
        DOWN, "reboot complete"), timed out in Slurm ("reboot timed out"), or O(timeout) passed."""
        deadline = time.time() + args['timeout']
        steps = {}
        records = {}
        while nodes:
            records = self._records(task_vars, nodes)
            self._known(nodes, records)
            steps = dict((n, R.reboot_step(records[n], False)) for n in nodes)
            if all(s in ('complete', 'timed-out', 'none') for s in steps.values()) or time.time() >= deadline:
                break
            time.sleep(max(1, args['interval']))
        result.update({'rebooted': sorted(n for n, s in steps.items() if s == 'complete'),
                       'not_rebooted': dict((n, 'step={0} State={1} Reason={2}'.format(
                           s, records[n].get('State'), records[n].get('Reason', '')))
                           for n, s in steps.items() if s != 'complete'),
                       'steps': steps})

    def _readiness_verdicts(self, nodes, task_vars):
        """{node: ids of its failed checks, or None when it was not judged} from each node's readiness result (the
        host variable nodeprep_readiness the readiness role leaves: its checks with their status)."""
        hostvars = task_vars.get('hostvars') or {}
        verdicts = {}
        for node in nodes:
            result = hostvars[node].get('nodeprep_readiness') if node in hostvars else None
            checks = result.get('checks') if isinstance(result, dict) else None
            verdicts[node] = R.failed_checks(checks) if isinstance(checks, list) else None
        return verdicts

    def _op_health(self, args, nodes, task_vars, result):
        """Readiness's verdict in Slurm (R.health_action on each node of O(verdicts): {node: failed check ids, or
        None when not judged}): drain the failing nodes that are free with nodeprep:health:<ids>, rewrite our reason
        when the failed checks changed, resume the nodes our verdict drained that pass now; every other node is left
        as it is. One scontrol show node, then one scontrol update per distinct change."""
        records = self._records(task_vars)
        actions = {}
        for node in nodes:
            failed = args['verdicts'][node]
            if node not in records:
                actions[node] = {'action': 'unknown', 'reason': '', 'why': 'Slurm does not know the node'}
                continue
            actions[node] = R.health_action(records[node], None if failed is None else list(failed))
        by_kind = {}
        for node in nodes:
            act = actions[node]
            if act['action'] in ('drain', 'update', 'resume'):
                by_kind.setdefault((act['action'], act['reason']), []).append(node)
        result.update({'actions': actions,
                       'drained': sorted(n for n in nodes if actions[n]['action'] == 'drain'),
                       'updated': sorted(n for n in nodes if actions[n]['action'] == 'update'),
                       'resumed': sorted(n for n in nodes if actions[n]['action'] == 'resume'),
                       'skipped': dict((n, actions[n]['why']) for n in nodes if actions[n]['action'] == 'skip'),
                       'unknown': sorted(n for n in nodes if actions[n]['action'] == 'unknown')})
        if not by_kind:
            return
        result['changed'] = True
        if self._task.check_mode:
            result['msg'] = 'check mode: nothing changed in Slurm'
            return
        for (kind, reason), names in sorted(by_kind.items()):
            argv = ['scontrol', 'update', 'nodename=' + R.hostlist(names)]
            if kind == 'drain':
                argv += ['state=DRAIN', 'reason=' + reason]
            elif kind == 'update':
                argv += ['reason=' + reason]
            else:
                argv += ['state=RESUME']
            self._run(argv, task_vars)
