# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# The controller side of the one plan per role and node (plugins/module_utils/plans/_plan.py): which roles plan in
# Python, in which order site.yml runs them, and the typing of the role variables from the rule modules' SETTINGS
# with Ansible's own argument spec validator (the same one a role's meta/argument_specs.yml validation uses).

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import io
import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_dcgm
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_gpu_settings
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_imex
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_kernel
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_memlock
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nccl
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nic_offload
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nvidia_driver
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_perf_tools
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_rdma
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_shm
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _readiness_settings

# Every role of the collection that configures a node, in the order playbooks/site.yml runs them: the one list of
# the roles (site.yml, the readiness role and the node_plan action read it from here).
SITE_ROLES = ('kernel', 'nvidia_driver', 'imex', 'gpu_settings', 'memlock', 'shm', 'nccl', 'nic_offload', 'rdma',
              'dcgm', 'perf_tools')

# The rule module of each role (its plan() and SETTINGS): every role of SITE_ROLES decides in Python.
RULES = dict((module.ROLE, module) for module in (
    _plan_kernel, _plan_nvidia_driver, _plan_imex, _plan_gpu_settings, _plan_memlock, _plan_shm, _plan_nccl, _plan_nic_offload,
    _plan_rdma, _plan_dcgm, _plan_perf_tools))

# The roles of site.yml's batched play (they may reboot a node), and the others: its settings roles.
DISRUPTIVE_ROLES = ('kernel', 'nvidia_driver')
SETTINGS_ROLES = tuple(role for role in SITE_ROLES if role not in DISRUPTIVE_ROLES)
# What the site_roles lookup's stage option names.
STAGES = {'all': SITE_ROLES, 'disruptive': DISRUPTIVE_ROLES, 'settings': SETTINGS_ROLES}

# The collection's root on the controller (roles/<role>/... of ROLE_FILES are read from here).
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ROLE_FILES = {}

# ansible-core before 2.19 names the type given as "<class 'str'>", later releases as "str": one wording.
_TYPE_RE = re.compile(r"is of type <class '([A-Za-z_]+)'>")


def _wording(message):
    """The validator's message in one wording for every ansible-core release (2.16 also puts two spaces between
    sentences)."""
    return re.sub(r' {2,}', ' ', _TYPE_RE.sub(r'is of type \1', message))


# Keys of an argument spec entry that the validator does not take.
_DOC_KEYS = ('description', 'version_added')


class PlanError(Exception):
    """A role name or a call that the planner cannot take (the message names the value and what is allowed)."""


def rules(role):
    try:
        return RULES[role]
    except KeyError:
        raise PlanError('roles: {0!r} is not a role of gpufleet.nodeprep that plans in Python; those that do: '
                        '{1}'.format(role, ', '.join(SITE_ROLES)))


def contracts():
    """``[(role, SETTINGS)]`` of every role of the collection (site.yml's order, then readiness): the one source of
    each role's variables, from which ``make settings-gen`` writes the role's meta/argument_specs.yml options,
    defaults/main.yml and README variable table."""
    return [(role, RULES[role].SETTINGS) for role in SITE_ROLES] + [
        (_readiness_settings.ROLE, _readiness_settings.SETTINGS)]


def validator_spec(settings):
    """The argument spec of ``settings`` (a rule module's SETTINGS) without its documentation keys."""
    spec = {}
    for name, entry in settings.items():
        clean = dict((key, value) for key, value in entry.items() if key not in _DOC_KEYS)
        if 'options' in clean:
            clean['options'] = validator_spec(clean['options'])
        spec[name] = clean
    return spec


def typed_settings(role, provided):
    """(settings, problems) of ``role``: the variables the play gave (``provided``, already templated; only the
    role's own names are read) typed and completed with the defaults of the rule module's SETTINGS.

    Types follow Ansible's validator: ``'false'``/``'no'`` become False, a comma-separated string given for a
    list becomes a list.  A value that cannot be typed is a problem naming the variable; its default is used so
    that the plan can still say what else is wrong, and the role fails on the problem before it changes anything.
    """
    module = rules(role)
    spec = validator_spec(module.SETTINGS)
    given = dict((name, provided[name]) for name in spec if name in provided)
    checked = ArgumentSpecValidator(spec).validate(copy.deepcopy(given))
    settings = dict(checked.validated_parameters)
    problems = []
    if checked.error_messages:
        # One at a time, to know which values did not type: those fall back to their default, so that the plan
        # can still say what else is wrong (the role fails on the problems before it changes anything).
        for name in sorted(given):
            one = ArgumentSpecValidator({name: spec[name]}).validate(copy.deepcopy({name: given[name]}))
            if one.error_messages:
                settings[name] = copy.deepcopy(spec[name].get('default'))
                problems.extend('{0}={1}: {2} (role {3}: docs/roles/{3}.md)'.format(
                    name, _plan.show(given[name]), _wording(message), role)
                    for message in one.error_messages)
    for name in spec:
        settings.setdefault(name, copy.deepcopy(spec[name].get('default')))
    return settings, problems


def gather_request(roles, settings_by_role):
    """One gather request (see _plan.new_gather) for ``roles``."""
    return _plan.merge_gathers(_plan.role_gather(rules(role), settings_by_role[role]) for role in roles)


def role_files(role):
    """``{key: text}`` of the files a rule module names in ``ROLE_FILES`` (``{key: path in roles/<role>/}``): files
    the role ships that a plan writes with their full content (a script copied to the node), read once per process
    on the controller so that the plan stays pure (it gets them as ``context['role_files']``)."""
    module = rules(role)
    if role not in _ROLE_FILES:
        texts = {}
        for key, relative in sorted(getattr(module, 'ROLE_FILES', {}).items()):
            path = os.path.join(COLLECTION_ROOT, 'roles', role, relative)
            try:
                with io.open(path, encoding='utf-8') as handle:
                    texts[key] = handle.read()
            except (IOError, OSError) as exc:
                raise PlanError('role {0}: cannot read {1}: {2}'.format(role, path, exc))
        _ROLE_FILES[role] = texts
    return dict(_ROLE_FILES[role])


def refusal(role, plan, host=''):
    """Why ``role`` must stop on ``host`` before it changes anything, in one line built from its plan's own words:
    ``<role> on <host>: invalid settings: <problem>; ...; <error>; ...; facts not gathered: <missing>; ...`` (each
    problem names the variable, the value given and what is allowed).  None when the plan has no problem, error or
    missing fact (a GPU role's plan on a node that is not a GPU node keeps only its problems)."""
    parts = []
    if plan.get('problems'):
        parts.append('invalid settings: ' + '; '.join(plan['problems']))
    parts.extend(plan.get('errors') or [])
    if plan.get('missing'):
        parts.append('facts not gathered: ' + '; '.join(plan['missing']))
    return '{0} on {1}: {2}'.format(role, host or 'this node', '; '.join(parts)) if parts else None


def plan_role(role, facts, settings, problems, context):
    """The plan of ``role`` (finished: ``run`` filled), with the typing problems first and the facts still missing."""
    module = rules(role)
    if getattr(module, 'ROLE_FILES', None):
        context = dict(context if context is not None else _plan.new_context(), role_files=role_files(role))
    return _plan.plan_with(module, facts, settings, problems, context)
