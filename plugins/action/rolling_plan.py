# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of gpufleet.nodeprep.rolling_plan: the plan of a rolling maintenance run, on the controller, from every
host's plans (ansible_facts.nodeprep_plans), its marker file (ansible_facts.nodeprep_contents) and the backend's
state answer.  The rules: plugins/module_utils/rules/_rolling.py (plan_run).  Documentation:
plugins/modules/rolling_plan.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('hosts', 'slurm', 'run_id', 'batch', 'include_held', 'retry_failed', 'min_available',
                             'reboot_timeout', 'busy', 'max_failed', 'reboot'))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=dict(
            hosts=dict(type='list', elements='str', required=True),
            slurm=dict(type='dict'),
            run_id=dict(type='str', required=True),
            batch=dict(type='raw', default=1),
            include_held=dict(type='bool', default=False),
            retry_failed=dict(type='bool', default=False),
            min_available=dict(type='int', default=0),
            reboot_timeout=dict(type='int', default=0),
            busy=dict(type='str', default='skip'),
            max_failed=dict(type='int', default=1),
            reboot=dict(type='str', default='roles', choices=list(R.REBOOT_MODES)),
        ))
        hostvars = task_vars.get('hostvars') or {}
        nodes = []
        for host in args['hosts']:
            if host not in hostvars:
                raise AnsibleActionFail('hosts: {0} is not in the inventory'.format(host))
            facts = hostvars[host].get('ansible_facts') or {}
            plans = plain(facts.get('nodeprep_plans') or {})
            if not plans:
                raise AnsibleActionFail('{0}: no ansible_facts.nodeprep_plans; run gpufleet.nodeprep.node_plan '
                                        'first'.format(host))
            contents = plain(facts.get('nodeprep_contents') or {})
            nodes.append({'node': host, 'plans': plans, 'marker': contents.get(R.MARKER)})
        slurm = plain(args['slurm']) if args['slurm'] else None
        options = dict((k, args[k]) for k in ('run_id', 'batch', 'include_held', 'retry_failed', 'min_available',
                                              'reboot_timeout', 'busy', 'max_failed', 'reboot'))
        try:
            plan = R.plan_run(nodes, slurm, options)
        except R.RollingError as exc:
            raise AnsibleActionFail(to_native(exc))
        plan['decisions'] = dict((d['node'], d) for d in plan['decisions'])
        result.update(plan)
        result['changed'] = False
        return result
