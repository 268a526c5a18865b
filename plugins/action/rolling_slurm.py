# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of gpufleet.nodeprep.rolling_slurm: the Slurm backend of the rolling maintenance run (state, drain,
set_reason, wait_empty, resume, reboot, wait_reboot).  Every Slurm command is an argv run by ansible.builtin.command on the host the task
runs on (delegate_to the Slurm controller); the decisions are plugins/module_utils/rules/_rolling.py.
Documentation: plugins/modules/rolling_slurm.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R

OPS = ('state', 'drain', 'set_reason', 'wait_empty', 'resume', 'reboot', 'wait_reboot')
WRITES = ('drain', 'set_reason', 'resume', 'reboot')


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('op', 'nodes', 'reason', 'reasons', 'timeout', 'interval', 'resume_timeout', 'bin_dir'))

    def _run(self, argv, task_vars):
        """One Slurm command (argv, LC_ALL=C) on the task's host; its stdout, or a failure naming the command."""
        full = ['env', 'LC_ALL=C'] + list(argv)
        full[2] = self._bin_dir.rstrip('/') + '/' + full[2] if self._bin_dir else full[2]
        result = self._execute_module(module_name='ansible.builtin.command', module_args={'argv': full},
                                      task_vars=task_vars)
        self._commands.append(' '.join(argv))
        if result.get('failed') or result.get('rc', 0) != 0:
            raise AnsibleActionFail('{0}: {1} failed (rc={2}): {3}'.format(
                self._host_label, ' '.join(argv), result.get('rc'),
                (result.get('stderr') or result.get('msg') or '').strip()[-500:]))
        return result.get('stdout', '')

    def _records(self, task_vars):
        return R.parse_nodes(self._run(['scontrol', 'show', 'node', '-o'], task_vars))

    def _jobs(self, node, task_vars):
        return R.parse_jobs(self._run(['squeue', '-h', '-w', node, '-o', R.SQUEUE_FORMAT], task_vars))

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
        if op in WRITES and not nodes:
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
        records = self._records(task_vars)
        config = R.parse_config(self._run(['scontrol', 'show', 'config'], task_vars))
        partitions = R.parse_partitions(self._run(['scontrol', 'show', 'partition', '-o'], task_vars))
        jobs = {}
        for node in nodes:
            if node in records:
                jobs[node] = R.active_jobs(self._jobs(node, task_vars))
        result.update({'records': records, 'config': dict((k, config[k]) for k in config
                                                          if k in ('ResumeTimeout', 'ReturnToService',
                                                                   'SLURM_VERSION', 'RebootProgram')),
                       'partitions': partitions, 'jobs': jobs})

    def _op_drain(self, args, nodes, task_vars, result):
        records = self._records(task_vars)
        self._known(nodes, records)
        # Never a node that is someone else's, nor one already ours (never drained twice).
        refused = [n for n in nodes if R.node_status(records[n])['held'] or R.node_status(records[n])['ours']]
        if refused:
            raise AnsibleActionFail('{0}: will not drain {1}: already drained, down or with a reason ({2})'.format(
                self._host_label, ', '.join(refused), '; '.join('{0} State={1} Reason={2}'.format(
                    n, records[n].get('State'), records[n].get('Reason', '')) for n in refused)))
        self._run(['scontrol', 'update', 'nodename=' + ','.join(nodes), 'state=DRAIN',
                   'reason=' + args['reason']], task_vars)
        result['changed'] = True

    def _op_set_reason(self, args, nodes, task_vars, result):
        records = self._records(task_vars)
        self._known(nodes, records)
        # Only a node whose current reason is ours gets a new one: an admin's reason is never overwritten.
        mine = [n for n in nodes if R.node_status(records[n])['ours'] is not None]
        skipped = [n for n in nodes if n not in mine]
        by_reason = {}
        for name in mine:
            if R.strip_reason(records[name].get('Reason', '')) != args['reasons'][name]:
                by_reason.setdefault(args['reasons'][name], []).append(name)
        for reason in sorted(by_reason):
            self._run(['scontrol', 'update', 'nodename=' + ','.join(by_reason[reason]), 'reason=' + reason],
                      task_vars)
            result['changed'] = True
        result.update({'updated': mine, 'not_ours': skipped})

    def _op_wait_empty(self, args, nodes, task_vars, result):
        deadline = time.time() + args['timeout']
        state = {}
        while True:
            records = self._records(task_vars)
            self._known(nodes, records)
            for node in nodes:
                jobs = R.active_jobs(self._jobs(node, task_vars))
                status = R.node_status(records[node])
                state[node] = {'jobs': jobs, 'drained': status['drained'] and not jobs,
                               'state': status['state'], 'reason': status['reason']}
            if all(s['drained'] for s in state.values()) or time.time() >= deadline:
                break
            time.sleep(max(1, args['interval']))
        result.update({'empty': sorted(n for n, s in state.items() if s['drained']),
                       'busy': dict((n, s['jobs']) for n, s in state.items() if not s['drained']),
                       'nodes_state': state, 'timed_out': not all(s['drained'] for s in state.values())})

    def _op_resume(self, args, nodes, task_vars, result):
        records = self._records(task_vars)
        self._known(nodes, records)
        mine = [n for n in nodes if R.may_resume(records[n])]
        refused = dict((n, 'State={0} Reason={1}'.format(records[n].get('State'), records[n].get('Reason', '')))
                       for n in nodes if n not in mine)
        if mine:
            self._run(['scontrol', 'update', 'nodename=' + ','.join(mine), 'state=RESUME'], task_vars)
            result['changed'] = True
        deadline = time.time() + args['resume_timeout']
        back = []
        while mine:
            records = self._records(task_vars)
            back = [n for n in mine if R.back_in_service(records[n])]
            if len(back) == len(mine) or time.time() >= deadline:
                break
            time.sleep(max(1, min(args['interval'], 2)))
        result.update({'resumed': mine, 'back': back, 'not_back': dict(
            (n, records[n].get('State')) for n in mine if n not in back), 'not_ours': refused})

    def _op_reboot(self, args, nodes, task_vars, result):
        """scontrol reboot nextstate=DOWN reason=<ours> for the nodes of ours whose reboot_step is 'request'; a reboot
        already asked or issued is waited for (wait_reboot), never asked twice."""
        records = self._records(task_vars)
        self._known(nodes, records)
        not_ours = [n for n in nodes if R.node_status(records[n])['ours'] is None]
        if not_ours:
            raise AnsibleActionFail('{0}: will not ask Slurm to reboot {1}: their reason is not ours ({2})'.format(
                self._host_label, ', '.join(not_ours), '; '.join('{0} State={1} Reason={2}'.format(
                    n, records[n].get('State'), records[n].get('Reason', '')) for n in not_ours)))
        steps = dict((n, R.reboot_step(records[n], True)) for n in nodes)
        ask = [n for n in nodes if steps[n] == 'request']
        if ask:
            self._run(['scontrol', 'reboot', 'nextstate=DOWN', 'reason=' + args['reason'], ','.join(ask)],
                      task_vars)
            result['changed'] = True
        result.update({'asked': ask, 'steps': steps})

    def _op_wait_reboot(self, args, nodes, task_vars, result):
        """Poll until each node's Slurm reboot is complete (it registered again: DOWN, "reboot complete"), timed
        out in Slurm ("reboot timed out"), or O(timeout) passed."""
        deadline = time.time() + args['timeout']
        steps = {}
        records = {}
        while nodes:
            records = self._records(task_vars)
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
