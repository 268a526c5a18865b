# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller side of gpufleet.nodeprep.node_plan: type the role variables once, gather what the roles need (one
gpu_node_facts execution, only when the facts lack it) and return one plan per role.
Documentation: plugins/modules/node_plan.py; the plan's shape: plugins/module_utils/plans/_plan.py."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
# Ansible's own OS facts, when the play has them (setup), win over the gather's /etc/os-release (_os_release.os_facts).
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import OS_FACT_KEYS
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _imex_members
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_summary
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _run_settings
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._filter_input import plain
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils._gather_resolve import resolve_gathered

GATHER_MODULE = 'gpufleet.nodeprep.gpu_node_facts'
GATHER_MODES = ('auto', 'always', 'never')
UNREACHABLE_MODES = ('unreachable', 'fail')
# The connection errors that are a limit passing (OpenSSH: "Connection timed out during banner exchange", "connect to
# host ... port 22: Connection timed out", "Connection to ... port 22 timed out").
_TIMED_OUT_WORDS = ('timed out',)
# The fact namespaces a plan may read (only these are copied out of ansible_facts).
FACT_NAMES = ('nvidia', 'kernel_state', 'limits', 'shm', 'nics', 'imex', 'nodeprep_gathered', 'nodeprep_errors',
              'nodeprep_units', 'nodeprep_files', 'nodeprep_packages', 'nodeprep_contents', 'nodeprep_file_patterns') \
    + OS_FACT_KEYS
# Gathered namespaces that a gather adds to instead of replacing (what it did not read again stays).
_MERGED = ('nodeprep_units', 'nodeprep_files', 'nodeprep_packages', 'nodeprep_contents', 'nodeprep_errors')
# keep=summary: the keys of each plan kept on a host where no plan has anything to do or to say.
SUMMARY_KEYS = ('run', 'reasons', 'reboot', 'gpu_node', 'gpu_skip')


def short_name(role):
    return str(role).rsplit('.', 1)[-1]


def gather_args(request, keep_gathered=(), fail_on_error=True, nvidia_timeout=None, nvidia_topology=False,
                command_timeout=None):
    """The module arguments of gpu_node_facts for a gather request (_plan.new_gather)."""
    args = {'gather_subset': list(request['subsets']), 'keep_gathered': list(keep_gathered),
            'fail_on_error': bool(fail_on_error)}
    if command_timeout is not None:
        args['command_timeout'] = int(command_timeout)
    for key in ('units', 'files', 'packages', 'contents', 'limits_users', 'limits_services', 'nic_networks',
                'nic_nm_properties'):
        if request.get(key):
            args[key] = list(request[key])
    for key in ('shm_path', 'imex_config', 'imex_timeout'):
        if request.get(key):
            args[key] = request[key]
    if nvidia_timeout is not None:
        args['nvidia_timeout'] = int(nvidia_timeout)
    if nvidia_topology and 'nvidia' in args['gather_subset']:
        args['nvidia_topology'] = True
    return args


def summary_of(plans):
    """``plans`` with only the keys SUMMARY_KEYS of each plan, when no plan has anything to do or to say (every
    ``run`` empty); else None (the host keeps everything)."""
    if any(plan.get('run') for plan in plans.values()):
        return None
    return dict((role, dict((key, plan[key]) for key in SUMMARY_KEYS if key in plan)) for role, plan in plans.items())


display = Display()


def runs_lines(host, runs):
    """The lines that say why ``host`` goes through each play of site.yml (_plans.site_runs), one per play, as the
    run's output shows them (none for a host without work)."""
    return ['[{0}] {1}: {2}'.format(host, key, '; '.join(reasons)) for key, reasons in runs]


def site_group_result(runs, add_group=None):
    """Put the host in the groups of site.yml's plays ``runs`` (_plans.site_runs): the part of the action's result
    that does it. ansible-core 2.21 and later add a group through the action's ``add_group`` (the strategy's inventory,
    as group_by does; ``add_group`` is that bound method) and nothing goes into the result. Before 2.21 the strategy
    adds the one group a result names in ``add_group`` as group_by's result names it, under its ``parent_groups``: the
    group of this set of plays (nodeprep_site_<keys>), under every group of ``runs``, so that the host is in each."""
    names = [_plans.site_group(key) for key, _reasons in runs]
    if not names:
        return {}
    if add_group is not None:
        for name in names:
            add_group(name, parent_group_names=['all'])
        return {}
    return {'add_group': 'nodeprep_site_' + '__'.join(key for key, _reasons in runs), 'parent_groups': names}


def connection_limit(message, seconds):
    """The SSH connect limit a connection error says passed (``{'limit', 'variable', 'seconds', 'what'}``), or None
    for any other connection error (refused, no route, authentication)."""
    text = ' '.join(str(message).split()).lower()
    if not any(words in text for words in _TIMED_OUT_WORDS):
        return None
    return {'limit': 'ssh_connect', 'variable': 'ansible_ssh_timeout', 'seconds': seconds,
            'what': 'the SSH connection'}


def ssh_timeout(connection):
    """The SSH connect limit of ``connection`` (the ssh connection's ``timeout`` option), or None."""
    try:
        return connection.get_option('timeout')
    except Exception:  # a connection plugin without that option (local, a bench's replay)
        return None


def limit_words(limit):
    if limit is None:
        return ''
    return ' (the SSH connect limit{0} passed: ansible_ssh_timeout)'.format(
        ' of {0} s'.format(limit['seconds']) if limit['seconds'] is not None else '')


def merge_facts(old, new, subsets=()):
    """The facts after a gather: ``new`` over ``old``; the per-path and per-unit maps are added to, and an error of a
    subset read again (``subsets``) is replaced by what this gather says of it."""
    out = dict(old)
    for key, value in new.items():
        if key in _MERGED and isinstance(old.get(key), dict) and isinstance(value, dict):
            merged = dict(old[key])
            if key == 'nodeprep_errors':
                merged = dict((name, error) for name, error in merged.items() if name not in subsets)
            merged.update(value)
            out[key] = merged
        else:
            out[key] = value
    if subsets and 'nodeprep_errors' not in new and isinstance(old.get('nodeprep_errors'), dict):
        out['nodeprep_errors'] = dict((name, error) for name, error in old['nodeprep_errors'].items()
                                      if name not in subsets)
    return out


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(('roles', 'gather', 'gather_extra', 'fail_on_error', 'fail_on_problems', 'nvidia_timeout',
                             'nvidia_topology', 'plan', 'run', 'keep',
                             'record', 'on_unreachable', 'site_groups'))

    def _facts(self, task_vars):
        facts = task_vars.get('ansible_facts') or {}
        return plain(dict((name, facts[name]) for name in FACT_NAMES if name in facts))

    def _plan_all(self, roles, facts, typed, context):
        return dict((role, _plans.plan_role(role, facts, typed[role][0], typed[role][1], context)) for role in roles)

    def _ssh_timeout(self):
        return ssh_timeout(self._connection)

    def _gather(self, request, keep, args, task_vars, command_timeout):
        module_args = gather_args(request, keep_gathered=keep, fail_on_error=args['fail_on_error'],
                                  nvidia_timeout=args['nvidia_timeout'], nvidia_topology=args['nvidia_topology'],
                                  command_timeout=command_timeout)
        try:
            return self._execute_module(module_name=GATHER_MODULE, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            message = to_native(exc)
            limit = connection_limit(message, self._ssh_timeout())
            if args['on_unreachable'] == 'fail':
                # The node leaves through the play's rescue, which records why (site.yml: the run summary).
                return {'failed': True, 'nodeprep_unreachable': True, 'msg': message + limit_words(limit),
                        'limit': limit}
            if limit is None:
                raise
            raise AnsibleConnectionFailure(message + limit_words(limit)) from None

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp

        _validation, args = self.validate_argument_spec(argument_spec=dict(
            roles=dict(type='list', elements='str'),
            gather=dict(type='str', choices=list(GATHER_MODES), default='auto'),
            gather_extra=dict(type='dict', default={}),
            fail_on_error=dict(type='bool', default=True),
            fail_on_problems=dict(type='bool', default=False),
            nvidia_timeout=dict(type='int'),
            nvidia_topology=dict(type='bool', default=False),
            plan=dict(type='bool', default=True),
            run=dict(type='dict', default={}),
            keep=dict(type='str', choices=['all', 'summary'], default='all'),
            record=dict(type='bool', default=False),
            on_unreachable=dict(type='str', choices=list(UNREACHABLE_MODES), default='unreachable'),
            site_groups=dict(type='bool', default=False),
        ))
        roles = [short_name(role) for role in (_plans.SITE_ROLES if args['roles'] is None else args['roles'])]
        unknown = [role for role in roles if role not in _plans.RULES]
        if unknown:
            raise AnsibleActionFail('roles: {0} {1} not a role of gpufleet.nodeprep that plans in Python; those that '
                                    'do: {2}'.format(', '.join(unknown), 'is' if len(unknown) == 1 else 'are',
                                                     ', '.join(_plans.SITE_ROLES)))
        extra = _plan.merge_gathers([plain(args['gather_extra'])])
        unknown = sorted(set(args['gather_extra']) - set(extra))
        if unknown:
            raise AnsibleActionFail('gather_extra: {0} not known; allowed keys: {1}'.format(
                ', '.join(unknown), ', '.join(sorted(extra))))

        # What the roles' tasks did so far in this run: only for roles whose plan reads it (run_state), checked here.
        for role, state in sorted(plain(args['run']).items()):
            reader = getattr(_plans.RULES.get(short_name(role)), 'run_state', None)
            if reader is None:
                readers = sorted(name for name, rules in _plans.RULES.items() if hasattr(rules, 'run_state'))
                raise AnsibleActionFail('run: {0} is not a role whose plan reads what the run did; those that do: '
                                        '{1}'.format(role, ', '.join(readers)))
            try:
                reader(state)
            except ValueError as exc:
                raise AnsibleActionFail('run.{0}: {1}'.format(role, to_native(exc)))

        # The settings, typed once from the rule modules' SETTINGS (the variables as the play sees them).
        typed = {}
        for role in roles:
            names = _plans.rules(role).SETTINGS
            provided = dict((name, task_vars[name]) for name in names if name in task_vars)
            try:
                provided = plain(self._templar.template(provided))
            except Exception as exc:  # an undefined variable inside a setting: name it, change nothing
                raise AnsibleActionFail('the variables of role {0} cannot be read: {1}'.format(role, to_native(exc)))
            typed[role] = _plans.typed_settings(role, provided)

        pending = task_vars.get('nodeprep_nvidia_driver_pending')
        # What the roles' tasks did so far in this run (the later stages of kernel and nvidia_driver), per role.
        context = _plan.new_context(host=task_vars.get('inventory_hostname', ''),
                                    check_mode=bool(self._play_context.check_mode),
                                    driver_pending=plain(self._templar.template(pending)) if pending else None,
                                    extra={'run': dict((short_name(r), v) for r, v in plain(args['run']).items())})
        if 'imex' in typed:
            # The imex plan's domain: the members of the node's domain group, read from the inventory.
            context['imex_members'] = _imex_members.members(task_vars,
                                                            typed['imex'][0].get('nodeprep_imex_domain_group'))
        facts = self._facts(task_vars)
        request = _plan.merge_gathers([_plans.gather_request(roles, dict((r, typed[r][0]) for r in roles)), extra])
        gathered = {}
        # What is read again replaces what the play had; everything else the play gathered stays valid (another
        # role's facts are not read again for this one).
        if args['gather'] == 'always':
            todo = request
        elif args['gather'] == 'auto':
            todo = _plan.missing_facts(request, facts)
            # A subset read again is read with all that the roles ask of it (every user, service, network), not
            # only the items found missing: its namespace is replaced as a whole.
            if 'limits' in todo['subsets']:
                todo['limits_users'] = list(request['limits_users'])
                todo['limits_services'] = list(request['limits_services'])
            if 'nic' in todo['subsets']:
                todo['nic_networks'] = list(request['nic_networks'])
                todo['nic_nm_properties'] = list(request['nic_nm_properties'])
            for key in ('shm_path', 'imex_config', 'imex_timeout'):
                todo[key] = request[key]
        else:
            todo = _plan.new_gather()
        if not _plan.is_empty(todo):
            keep = [subset for subset in facts.get('nodeprep_gathered') or [] if subset not in todo['subsets']]
            # The limit of every command of the gather (nodeprep_command_timeout), typed once here.
            try:
                limits = _run_settings.typed(self._templar.template(dict(
                    (name, task_vars[name]) for name in ('nodeprep_command_timeout',) if name in task_vars)),
                    ('nodeprep_command_timeout',))
            except ValueError as exc:
                raise AnsibleActionFail(to_native(exc))
            module_result = self._gather(todo, keep, args, task_vars, limits['nodeprep_command_timeout'])
            if module_result.get('failed') or module_result.get('unreachable'):
                result.update(module_result)
                return result
            gathered = plain(module_result.get('ansible_facts') or {})
            # What the node returned as read (limits, shm, nic, imex, nvidia.topology, kernel_state.rdma's boot and
            # modinfo reads), resolved here: one shape for every reader.
            read_warnings, failure = resolve_gathered(gathered, args['fail_on_error'], task_vars.get('inventory_hostname'))
            if failure:
                result.update(dict(failure, failed=True))
                return result
            patterns = [path for path in todo['files'] if any(c in path for c in '*?[')]
            old_patterns = facts.get('nodeprep_file_patterns') or []
            gathered['nodeprep_file_patterns'] = old_patterns + [p for p in patterns if p not in old_patterns]
            facts = merge_facts(facts, gathered, todo['subsets'])
            for key in _MERGED + ('nodeprep_file_patterns',):
                if key in facts and (key in gathered or key == 'nodeprep_errors'):
                    gathered[key] = facts[key]
            if module_result.get('warnings') or read_warnings:
                result['warnings'] = list(module_result.get('warnings') or []) + read_warnings

        if not args['plan']:
            result.update({'changed': False, 'gathered': bool(gathered), 'ansible_facts': gathered})
            return result
        plans = self._plan_all(roles, facts, typed, context)
        known = task_vars.get('ansible_facts', {}).get('nodeprep_plans') or {}
        all_plans = dict((key, value) for key, value in plain(known).items() if key not in plans) \
            if isinstance(known, dict) else {}
        all_plans.update(plans)
        runs = None
        if args['site_groups']:
            missing = [role for role in _plans.SITE_ROLES if role not in all_plans]
            if missing:
                raise AnsibleActionFail('site_groups: the groups of site.yml need the plans of every role; no plan of '
                                        '{0} (plan them in this task: roles unset)'.format(', '.join(missing)))
            runs = _plans.site_runs(all_plans)
        facts_out = dict(gathered)
        facts_out['nodeprep_plans'] = all_plans
        if args['record']:
            # For the end-of-run summary, what gpufleet.nodeprep.run_summary's record keeps: one task less per host.
            facts_out[_run_summary.RECORD_FACT] = _run_summary.record(
                all_plans, roles, plain(task_vars.get('ansible_facts', {}).get(_run_summary.RECORD_FACT) or {}))
        summary = summary_of(all_plans) if args['keep'] == 'summary' else None
        if summary is not None:
            # No role's play runs on this host: nothing later reads its facts or its whole plans.
            facts_out = dict((key, value) for key, value in facts_out.items() if key == _run_summary.RECORD_FACT)
            facts_out['nodeprep_plans'] = summary
        # The plans live once, in the facts: the roles, site.yml and readiness read ansible_facts.nodeprep_plans.
        result.update({'changed': False, 'gathered': bool(gathered), 'ansible_facts': facts_out})
        if runs is not None:
            # Which of site.yml's plays the node goes through, and why (shown with -v), and the groups of those plays.
            result['site_runs'] = dict(runs)
            result.update(site_group_result(runs, getattr(self, 'add_group', None)))
            # In the run's output without -v: the reasons a node is in each play (its plans' words, such as a refusal
            # with its fix); a node already right prints nothing.
            for line in runs_lines(context['host'], runs):
                display.display(line)
        if args['fail_on_problems']:
            # A role's prologue: the host stops here, before the role changes anything, in the plan's own words.
            refusals = [text for text in (_plans.refusal(role, plans[role], context['host']) for role in roles)
                        if text]
            if refusals:
                result.update({'failed': True, 'msg': ' | '.join(refusals)})
        return result
