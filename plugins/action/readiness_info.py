# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.readiness_info: type the settings once (every role's and the readiness role's
own), gather what the checks read in one gpu_node_facts execution (the health reads included), make every role's plan
from those facts and judge them here, with the pure functions of plugins/module_utils/rules/_readiness.py.
Documentation: plugins/modules/readiness_info.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nodeprep.plugins.action.node_plan import FACT_NAMES, GATHER_MODULE, \
    connection_limit, gather_args, limit_words, merge_facts, ssh_timeout
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import GLOB_CHARS
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_perf_tools
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _perf_gates
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _imex_members
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._gather_resolve import resolve_gathered

# The gather subset that fills each fact namespace a check needs (rules/_readiness.py CHECKS).
SUBSET_OF = dict((namespace, subset) for subset, namespace in _plan.SUBSET_NAMESPACES.items())
# Typed with the nvidia_driver role's SETTINGS (collection-wide; the checks of _readiness.py read it too).
SHARED = ('nodeprep_expected_gpus',)


def type_settings(provided):
    """``(own, roles, problems)``: the readiness role's settings and the collection-wide ones its checks read
    (SETTING_NAMES), every planning role's ``(settings, problems)``, and what stops the check: the readiness role's
    settings that cannot be used (typing, then _readiness.settings_problems) and a collection-wide one that does not
    type."""
    own, problems = _plans.typed_with(_readiness_settings.ROLE, _readiness_settings.SETTINGS, provided)
    roles = dict((role, _plans.typed_settings(role, provided)) for role in _plans.SITE_ROLES if role in _plans.RULES)
    driver, driver_problems = roles['nvidia_driver']
    for name in SHARED:
        own[name] = driver[name]
        problems.extend(p for p in driver_problems if p.startswith(name + '='))
    if not problems:
        problems = _readiness.settings_problems(own)
    return own, roles, problems


def gather_request(checks, own, roles, where=None):
    """``(request, options)``: the one gather the checks ``checks`` need (the owning roles' requests, the namespaces
    of every check, the kernel subset for the GPU-node rule) and gpu_node_facts' health options; the performance
    gates' tools only where ``where`` (_perf_gates.where) lets them run."""
    requests = [{'subsets': ['kernel']}]
    owners = sorted(set(_readiness.PLAN_CHECKS[c] for c in checks if c in _readiness.PLAN_CHECKS))
    requests.extend(_plan.role_gather(_plans.rules(role), roles[role][0]) for role in owners)
    # A check's namespaces are read for it, except a subset only its role's plan asks for (imex: the plan asks where
    # nodeprep_imex_domain_group is set; elsewhere imex.domain skips and nvidia-imex-ctl is never run).
    needs = [SUBSET_OF[namespace] for c in checks for namespace in _readiness.NEEDS[c]
             if namespace in SUBSET_OF and SUBSET_OF[namespace] not in _plan.ASKED_ONLY_SUBSETS]
    gates = [c for c in _perf_gates.GATES if c in checks]
    if 'gpu.dcgm_diag' in checks or 'gpu.health' in checks or gates:
        needs.append('nvidia')
    requests.append({'subsets': needs})
    request = _plan.merge_gathers(requests)
    request['subsets'] = [s for s in _plan.SUBSET_NAMESPACES if s in request['subsets']]
    options = {'nvidia_topology': 'gpu.topology' in checks}
    if 'nvlink.links' in checks and 'nvidia' in request['subsets']:
        options['nvidia_nvlink'] = True
    if 'gpu.health' in checks and own['nodeprep_readiness_kernel_log_lines'] > 0:
        options['kernel_log_lines'] = own['nodeprep_readiness_kernel_log_lines']
    if 'gpu.dcgm_diag' in checks and own['nodeprep_readiness_dcgm']:
        options.update(dcgm_diag=True, dcgm_level=own['nodeprep_readiness_dcgm_level'],
                       dcgm_timeout=own['nodeprep_readiness_dcgm_timeout'])
    if gates and where and where.get('run'):
        paths = _plan_perf_tools.gate_paths(roles['perf_tools'][0])
        options.update(perf_tools=dict((_perf_gates.TOOL[c], paths[_perf_gates.TOOL[c]]) for c in gates),
                       perf_timeout=own['nodeprep_readiness_performance_timeout'])
    return request, options


def node_state(value):
    """The scheduler's view of this node as the readiness role hands it over (option node_state), checked: None (no
    scheduler asked) or {scheduler, record, jobs, error}."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get('scheduler') != 'slurm':
        raise AnsibleActionFail('node_state: expected null or {{scheduler: slurm, record, jobs, error}}, got '
                                '{0!r}'.format(value))
    record = value.get('record')
    jobs = value.get('jobs') or []
    if record is not None and not isinstance(record, dict) or not isinstance(jobs, list):
        raise AnsibleActionFail('node_state: record must be a scontrol record (a dict) or null and jobs a list, got '
                                '{0!r}'.format(value))
    return {'scheduler': 'slurm', 'record': record, 'jobs': [str(j) for j in jobs],
            'error': str(value['error']) if value.get('error') else None}


def select(result, checks):
    """``result`` (_readiness.judge) with only the checks ``checks``, its summary and verdict counted from them."""
    if len(checks) == len(_readiness.CHECK_IDS):
        return result
    kept = [c for c in result['checks'] if c['id'] in checks]
    summary = _readiness.summarize(kept)
    return dict(result, checks=kept, summary=summary, ready=summary['status'] != _readiness.FAIL)


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('checks', 'node_state', 'settings_only'))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(argument_spec=dict(
            checks=dict(type='list', elements='str'),
            node_state=dict(type='raw'),
            settings_only=dict(type='bool', default=False),
        ))
        checks = list(_readiness.CHECK_IDS) if args['checks'] is None else list(args['checks'])
        unknown = sorted(set(checks) - set(_readiness.CHECK_IDS))
        if unknown or not checks:
            raise AnsibleActionFail('checks: {0}; allowed: check ids of {1}'.format(
                'unknown check ids ' + ', '.join(unknown) if unknown else 'empty', ', '.join(_readiness.CHECK_IDS)))

        # Every variable the checks and the plans read, typed once (the inventory's, else the SETTINGS defaults).
        names = set(_readiness_settings.SETTINGS)
        for role in _plans.RULES:
            names.update(_plans.rules(role).SETTINGS)
        provided = dict((name, task_vars[name]) for name in names if name in task_vars)
        try:
            provided = plain(self._templar.template(provided))
        except Exception as exc:  # an undefined variable inside a setting: name it, check nothing
            raise AnsibleActionFail('the variables of the readiness check cannot be read: {0}'.format(to_native(exc)))
        own, roles, problems = type_settings(provided)
        if not problems:
            # The limit of every command of the gather (collection-wide; its one typing: _run_settings).
            try:
                own.update(_run_settings.typed(provided, ('nodeprep_command_timeout',)))
            except ValueError as exc:
                problems = [str(exc)]
        if problems:
            result.update(failed=True, msg='readiness check: {0}'.format('; '.join(problems)))
            return result
        if args['settings_only']:
            # The role's run-once steps (Slurm, the report) read the settings typed here, never the variables.
            controller = _readiness_settings.slurm_controller(own, task_vars.get('groups'))
            result.update(changed=False, settings=dict((name, own[name]) for name in _readiness_settings.SETTINGS),
                          slurm_controller=controller,
                          slurm_delegate=controller or task_vars.get('inventory_hostname'))
            return result

        # Where the performance gates may run (never on a node that runs a job): decided here, before the gather.
        where = _perf_gates.where(own, node_state(args['node_state']))
        if roles['perf_tools'][1] and any(c in checks for c in _perf_gates.GATES) and where['run']:
            where = {'run': False, 'why': 'not run: the settings of role perf_tools (the paths of the tools) are '
                                          'invalid: {0}'.format('; '.join(roles['perf_tools'][1]))}
        # One gather of everything the checks read (one module execution), the health reads in the same call.
        request, options = gather_request(checks, own, roles, where)
        module_args = gather_args(request, fail_on_error=False, nvidia_timeout=own['nodeprep_readiness_nvidia_timeout'],
                                  nvidia_topology=options.pop('nvidia_topology'),
                                  command_timeout=own['nodeprep_command_timeout'])
        module_args.update(options)
        try:
            gathered = self._execute_module(module_name=GATHER_MODULE, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            # The node is unreachable, as for any task; a connection that timed out names the SSH connect limit.
            limit = connection_limit(to_native(exc), ssh_timeout(self._connection))
            if limit is None:
                raise
            raise AnsibleConnectionFailure(to_native(exc) + limit_words(limit)) from None
        if gathered.get('failed') or gathered.get('unreachable'):
            result.update(gathered)
            return result
        known = task_vars.get('ansible_facts') or {}
        new_facts = plain(gathered.get('ansible_facts') or {})
        # What the node returned as read, resolved here as node_plan resolves it (a failure is nodeprep_errors).
        read_warnings = resolve_gathered(new_facts, fail_on_error=False, host=task_vars.get('inventory_hostname'))[0]
        facts = merge_facts(plain(dict((name, known[name]) for name in FACT_NAMES if name in known)),
                            new_facts, request['subsets'])
        # The globs this gather read (a path a glob did not report does not exist), as node_plan records them.
        facts['nodeprep_file_patterns'] = [path for path in request['files'] if any(c in path for c in GLOB_CHARS)]
        facts[_perf_gates.WHERE_FACT] = where

        # Every role's plan from these facts; the judgement (the plans' drift and the health rules) on the controller.
        pending = task_vars.get('nodeprep_nvidia_driver_pending')
        context = _plan.new_context(host=task_vars.get('inventory_hostname', ''),
                                    check_mode=bool(self._play_context.check_mode),
                                    driver_pending=plain(self._templar.template(pending)) if pending else None)
        # The imex plan's domain: the members of the node's domain group, read from the inventory (as node_plan does).
        context['imex_members'] = _imex_members.members(task_vars, roles['imex'][0].get('nodeprep_imex_domain_group'))
        plans = dict((role, _plans.plan_role(role, facts, typed, typing, context))
                     for role, (typed, typing) in roles.items())
        try:
            judged = _readiness.judge(facts, dict((name, own[name]) for name in _readiness.SETTING_NAMES), plans)
        except _readiness.ReadinessError as exc:
            result.update(failed=True, msg='readiness check: {0}'.format(exc))
            return result
        if gathered.get('warnings') or read_warnings:
            result['warnings'] = list(gathered.get('warnings') or []) + read_warnings
        result.update(changed=False, **select(judged, checks))
        # Documented as checked_values (``values`` is a dictionary method: Jinja's result.values is never the list);
        # also under ``values``, the key of the per-host result the report reads (nodeprep_readiness['values']).
        result['checked_values'] = result['values']
        return result
