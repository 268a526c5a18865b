# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action of gpufleet.nodeprep.rolling_plan: the plan of a rolling maintenance run, on the controller, from every
host's plans (ansible_facts.nodeprep_plans), its marker file (ansible_facts.nodeprep_contents) and the backend's
state answer. The run's settings (the play's nodeprep_rolling_* variables) are typed here, once, with Ansible's
argument spec validator from _rolling.SETTINGS, and returned for the rest of the playbook. The rules:
plugins/module_utils/rules/_rolling.py (plan_run). Documentation: plugins/modules/rolling_plan.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import time

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _rolling as R
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain

PREFIX = 'nodeprep_rolling_'
# The roles' own settings the run reads (typed by the roles' SETTINGS, as node_plan types them).
REBOOT_TIMEOUTS = (('kernel', 'nodeprep_kernel_reboot_timeout'),
                   ('nvidia_driver', 'nodeprep_nvidia_driver_reboot_timeout'))


def short(name):
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


def typed_settings(provided):
    """(settings with short names, problems) of the run: ``provided`` (the play's nodeprep_rolling_* variables,
    templated) typed by R.SETTINGS with Ansible's validator, completed with the defaults, then bounded
    (R.check_settings). A problem names the variable, the value and what is allowed."""
    spec = _plans.validator_spec(R.SETTINGS)
    given = dict((name, provided[name]) for name in spec if name in provided)
    problems = []
    settings = {}
    for name in sorted(spec):
        if name not in given:
            settings[name] = copy.deepcopy(spec[name].get('default'))
            continue
        one = ArgumentSpecValidator({name: spec[name]}).validate(copy.deepcopy({name: given[name]}))
        if one.error_messages:
            settings[name] = copy.deepcopy(spec[name].get('default'))
            problems.extend('{0}={1!r}: {2}'.format(name, given[name], _plans._wording(message))
                            for message in one.error_messages)
        else:
            settings[name] = one.validated_parameters[name]
    problems.extend(R.check_settings(settings))
    return dict((short(k), v) for k, v in settings.items()), problems


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('hosts', 'slurm', 'run_id'))

    def _provided(self, names, task_vars):
        provided = dict((name, task_vars[name]) for name in names if name in task_vars)
        try:
            return plain(self._templar.template(provided))
        except Exception as exc:  # an undefined variable inside a setting: name it, change nothing
            raise AnsibleActionFail('the nodeprep_rolling_* variables cannot be read: {0}'.format(to_native(exc)))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=dict(
            hosts=dict(type='list', elements='str', required=True),
            slurm=dict(type='dict'),
            run_id=dict(type='str'),
        ))
        awx = dict((name, task_vars.get(name)) for prefix in R.AWX_PREFIXES
                   for name in (prefix + '_workflow_job_id', prefix + '_workflow_job_name',
                                prefix + '_job_template_name'))
        sliced = R.sliced_job(plain(awx))
        if sliced:
            raise AnsibleActionFail('rolling maintenance refused: ' + sliced)
        settings, problems = typed_settings(self._provided(R.SETTINGS, task_vars))
        timeouts = []
        for role, name in REBOOT_TIMEOUTS:
            typed, role_problems = _plans.typed_settings(role, self._provided([name], task_vars))
            problems.extend(role_problems)
            timeouts.append(typed[name])
        settings['reboot_timeout'] = max(timeouts)
        if settings['controller'] is None:
            heads = (task_vars.get('groups') or {}).get('slurm_head') or []
            if heads:
                settings['controller'] = heads[0]
            else:
                problems.append('nodeprep_rolling_controller is not set and the inventory has no group slurm_head: '
                                'name the host that runs scontrol and squeue')
        run_id = args['run_id'] or settings['run_id'] or time.strftime('%Y%m%dT%H%M%S', time.gmtime())
        if args['run_id'] and settings['run_id'] and args['run_id'] != settings['run_id']:
            problems.append('run_id {0!r} differs from nodeprep_rolling_run_id {1!r}'.format(
                args['run_id'], settings['run_id']))
        if problems:
            raise AnsibleActionFail('rolling maintenance refused, nothing changed: {0}'.format('; '.join(problems)))
        settings['run_id'] = run_id
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
        options = dict((k, settings[k]) for k in ('run_id', 'batch', 'include_held', 'retry_failed', 'min_available',
                                                  'reboot_timeout', 'busy', 'max_failed', 'reboot'))
        try:
            plan = R.plan_run(nodes, slurm, options)
        except R.RollingError as exc:
            raise AnsibleActionFail(to_native(exc))
        plan['decisions'] = dict((d['node'], d) for d in plan['decisions'])
        result.update(plan)
        result.update({'changed': False, 'run_id': run_id, 'settings': settings})
        return result
