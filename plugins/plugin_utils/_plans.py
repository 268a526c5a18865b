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
import math
import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import (
    NodeStateError, check_file_path, check_package_name, unit_name)
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

# After the kernel and driver play (a node that may have rebooted), every settings role runs and plans again.
AFTER_KERNEL_DRIVER = 'after the kernel and driver'


def site_runs(plans):
    """Which of site.yml's plays a node goes through, and why: ``[(key, reasons)]`` in site.yml's order, from its
    plans (``run`` of every role of SITE_ROLES; ``gpu_skip`` where a plan has it). ``kernel_driver``: any work of the
    batched play's roles (the node goes through every settings role after it); ``<role>``: a settings role with
    something to do or to say; ``settings``: the settings play (the roles above); ``no_gpu``: the node is not a GPU
    node (the first plan's words)."""
    reasons = dict((role, list(plans[role].get('run') or [])) for role in SITE_ROLES if role in plans)
    kernel_driver = [reason for role in DISRUPTIVE_ROLES for reason in reasons.get(role, [])]
    runs = []
    if kernel_driver:
        runs.append(('kernel_driver', kernel_driver))
    for role in SETTINGS_ROLES:
        if kernel_driver:
            runs.append((role, [AFTER_KERNEL_DRIVER]))
        elif reasons.get(role):
            runs.append((role, reasons[role]))
    settings = [key for key, _reasons in runs if key != 'kernel_driver']
    if settings:
        runs.append(('settings', settings))
    skips = [plans[role]['gpu_skip'] for role in SITE_ROLES if role in plans and plans[role].get('gpu_skip')]
    if skips:
        runs.append(('no_gpu', [skips[0]]))
    return runs


def site_group(key):
    """The inventory group of site.yml's play ``key`` (site_runs): nodeprep_<key>_work, or nodeprep_no_gpu."""
    return 'nodeprep_no_gpu' if key == 'no_gpu' else 'nodeprep_{0}_work'.format(key)


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


# The numbers a setting may hold, at any depth of its value (an int or float setting, a number inside a list, a dict or
# a raw setting, digits given as text to a raw setting): finite, and inside a signed 64-bit integer, the widest
# number the node's tools and files take (tmpfs size=, limits.conf, sysctl, nvidia-smi).  A YAML .inf or .nan, or a
# number of 400 digits, is refused naming the variable, before any rule does arithmetic with it.
NUMBER_MIN = -(2 ** 63)
NUMBER_MAX = 2 ** 63 - 1
NUMBERS_ALLOWED = 'allowed: a finite number from {0} to {1}'.format(NUMBER_MIN, NUMBER_MAX)
# Text that is a number (what a raw setting reads as one): digits, a sign, a fraction, an exponent.
_NUMBER_TEXT = re.compile(r'^\s*[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\s*$')

# A path setting (type path) names a file or folder on the node.  Ansible's path type would expand ~ and $VARIABLE on
# the controller, with the controller's home and environment; a trailing newline would name another file.
PATH_ALLOWED = ('allowed: an absolute path on the node as written (no ~ or $VARIABLE: the controller would expand '
                'them; no newline or other control character, no space at either end, no empty, . or .. part, no / '
                'at the end)')

# Path settings that name a folder on the controller, not on the node (readiness's report: ./readiness-report by
# default, relative to where ansible-playbook runs; ~ is the controller user's home, as Ansible's path type expands
# it): the node's path rule above is not theirs.
CONTROLLER_PATHS = ('nodeprep_readiness_report_dir',)

# Path settings whose rule says more precisely which paths it takes: a refused path names those words too (the
# rule's own check never sees a value the typing refused).
_PATH_WORDS = {'nodeprep_memlock_limits_file': _plan_memlock.FILE_ALLOWED}

# A list setting's items: an empty item (-e 'name=' or 'a,,b' split on commas) names nothing.
LIST_ITEM_ALLOWED = "allowed: a list of non-empty items; [] for none (-e '{\"name\": []}')"

# Longer values are shortened in the messages (a number of 400 digits).
_SHOWN_MAX = 100

# What the validator itself may raise on a value it cannot take (an int setting given .inf).
_TYPING_ERRORS = (ArithmeticError, ValueError, TypeError)


def _shown(value):
    """``value`` as the messages show it (_plan.show), shortened to its start and its length when long."""
    text = _plan.show(value)
    if len(text) > _SHOWN_MAX:
        return '{0}... ({1} characters)'.format(text[:_SHOWN_MAX // 2], len(text))
    return text


def _number_words(number):
    """Why ``number`` (an int or a float, not a bool) cannot be a setting's number, or None."""
    if isinstance(number, float):
        if math.isnan(number):
            return 'NaN is not a number'
        if math.isinf(number):
            return 'an infinite number'
    if not NUMBER_MIN <= number <= NUMBER_MAX:
        return 'a number out of range'
    return None


def _text_number(text):
    """The number that ``text`` writes (a raw setting reads digits as a number), or None when it writes none."""
    if not _NUMBER_TEXT.match(text):
        return None
    try:
        return int(text) if re.match(r'^\s*[-+]?[0-9]+\s*$', text) else float(text)
    except ValueError:  # more digits than Python converts (sys.int_info.str_digits_check_threshold): out of range
        return NUMBER_MAX + 1


def number_problem(value, raw=False, where=''):
    """Why a number inside a setting's ``value`` cannot be used, with where it sits (``memory: ``, ``[2]: ``), or
    None.  ``raw``: the setting's rule reads text too, so digits given as text count as the number they write."""
    if isinstance(value, bool):
        return None
    number = value if isinstance(value, (int, float)) else (
        _text_number(value) if raw and isinstance(value, str) else None)
    if number is not None:
        words = _number_words(number)
        return '{0}{1}; {2}'.format(where, words, NUMBERS_ALLOWED) if words else None
    if isinstance(value, dict):
        items = [(str(key), item) for key, item in sorted(value.items(), key=lambda pair: str(pair[0]))]
    elif isinstance(value, (list, tuple)):
        items = [('[{0}]'.format(index), item) for index, item in enumerate(value)]
    else:
        return None
    for key, item in items:
        found = number_problem(item, raw, '{0}{1}: '.format(where, key))
        if found:
            return found
    return None


def node_path_problem(value, empty_ok=False, words=None):
    """Why ``value`` cannot be a path setting (a file or folder on the node), or None.  ``empty_ok``: the setting's
    default is '' (its documented 'none').  ``words``: what the setting's rule allows, said first."""
    allowed = (words + '; ' if words else '') + PATH_ALLOWED + (", or '' (the default)" if empty_ok else '')
    if value == '' and empty_ok:
        return None
    if not isinstance(value, str) or not value:
        return 'not a path; ' + allowed
    if '\n' in value or '\r' in value:
        what = 'has a newline'
    elif any(ord(char) < 32 or ord(char) == 127 for char in value):
        what = 'has a control character'
    elif value != value.strip():
        what = 'has a space at one end'
    elif value.startswith('~'):
        what = '~ is not expanded on the node'
    elif '$' in value:
        what = '$ is not expanded on the node'
    elif not value.startswith('/'):
        what = 'not an absolute path'
    elif len(value) > 1 and value.endswith('/'):
        what = 'ends with /'
    elif [part for part in value.split('/')[1:] if part in ('', '.', '..')]:
        what = 'has an empty, . or .. part'
    else:
        return None
    return '{0}; {1}'.format(what, allowed)


def _given_problem(name, entry, value):
    """What is wrong with a setting's value as given, before the validator types it (which would expand a path on
    the controller, or raise on a number it cannot take), or None."""
    found = number_problem(value, raw=entry['type'] == 'raw')
    if found is None and entry['type'] == 'path' and name not in CONTROLLER_PATHS:
        found = node_path_problem(value, empty_ok=entry.get('default') == '', words=_PATH_WORDS.get(name))
    return found


def _typed_problem(entry, value):
    """What is wrong with a setting's value once typed (text typed into a number: '1e999' is an infinite float), or
    None."""
    found = number_problem(value)
    if found is None and entry['type'] == 'list' and entry.get('elements', 'str') == 'str' and \
            isinstance(value, list) and [item for item in value if isinstance(item, str) and not item.strip()]:
        found = 'has an empty item; ' + LIST_ITEM_ALLOWED
    return found


def _validate(spec, given):
    """``(typed, failed)``: Ansible's validator over ``given``; ``failed`` maps each name it refused to its messages.
    One at a time only when something failed, to know which values did not type."""
    try:
        checked = ArgumentSpecValidator(spec).validate(copy.deepcopy(given))
        if not checked.error_messages:
            return dict(checked.validated_parameters), {}
    except _TYPING_ERRORS:
        pass
    typed, failed = {}, {}
    for name in sorted(given):
        try:
            one = ArgumentSpecValidator({name: spec[name]}).validate(copy.deepcopy({name: given[name]}))
        except _TYPING_ERRORS as exc:
            failed[name] = ['cannot be typed as {0}: {1}'.format(spec[name].get('type', 'str'), exc)]
            continue
        if one.error_messages:
            failed[name] = [_wording(message) for message in one.error_messages]
        else:
            typed[name] = one.validated_parameters[name]
    return typed, failed


def _gather_problem(module, settings):
    """Why the gather ``settings`` make the role ask for cannot be asked of a node (a unit, file or package name the
    gather module refuses: a unit name with a space given in a list setting), in the gather module's words, or
    None."""
    try:
        request = _plan.role_gather(module, settings)
        for unit in request.get('units') or []:
            unit_name(unit)
        for path in request.get('files') or []:
            check_file_path(path)
        for name in request.get('packages') or []:
            check_package_name(name)
    except NodeStateError as exc:
        return 'the node cannot be asked about it: {0}'.format(exc)
    return None


def typed_settings(role, provided):
    """(settings, problems) of ``role``: the variables the play gave (``provided``, already templated; only the
    role's own names are read) typed and completed with the defaults of the rule module's SETTINGS.

    Types follow Ansible's validator: ``'false'``/``'no'`` become False, a comma-separated string given for a
    list becomes a list.  Before and after it, for every setting of every role, driven by its entry in SETTINGS: a
    number anywhere in the value must be finite and fit a signed 64-bit integer (number_problem), a path setting
    must be an absolute path on the node as written (node_path_problem: Ansible's path type would expand ~ and
    $VARIABLE on the controller), a list of strings has no empty item, and the role's gather request must be one
    the gather module takes (_gather_problem: a unit name with a space).  A value that cannot be used is a problem
    naming the variable; its default is used so that the plan can still say what else is wrong (a raise here would
    lose the plans of every role of the node), and the role fails on the problem before it changes anything.
    """
    module = rules(role)
    return typed_with(role, module.SETTINGS, provided, module)


def typed_with(role, contract, provided, module=None):
    """typed_settings over the SETTINGS ``contract`` of ``role`` (a rule module's, or the readiness role's own:
    plugin_utils/_readiness_settings.py); ``module``, the role's rule module, when its gather request is checked
    too (the readiness role's settings make no gather request)."""
    spec = validator_spec(contract)
    given = dict((name, provided[name]) for name in spec if name in provided)
    refused = {}
    for name in given:
        found = _given_problem(name, spec[name], given[name])
        if found:
            refused[name] = [found]
    settings, failed = _validate(spec, dict((name, value) for name, value in given.items() if name not in refused))
    refused.update(failed)
    for name in given:
        if name not in refused:
            found = _typed_problem(spec[name], settings[name])
            if found:
                refused[name] = [found]
    typed = [name for name in sorted(given) if name not in refused]
    defaults = dict((name, copy.deepcopy(entry.get('default'))) for name, entry in spec.items())
    chosen = dict(defaults, **dict((name, settings[name]) for name in typed))
    if module is not None and typed and _gather_problem(module, chosen):
        # The setting that makes the gather request one the node cannot be asked: each alone over the defaults.
        for name in typed:
            found = _gather_problem(module, dict(defaults, **{name: settings[name]}))
            if found:
                refused[name] = [found]
    problems = []
    for name in sorted(refused):
        settings[name] = copy.deepcopy(spec[name].get('default'))
        problems.extend('{0}={1}: {2} (role {3}: docs/roles/{3}.md)'.format(name, _shown(given[name]), message, role)
                        for message in refused[name])
    for name in spec:
        settings.setdefault(name, copy.deepcopy(spec[name].get('default')))
    return settings, problems


def gather_request(roles, settings_by_role):
    """One gather request (see _plan.new_gather) for ``roles``."""
    return _plan.merge_gathers(_plan.role_gather(rules(role), settings_by_role[role]) for role in roles)


def role_files(role):
    """``{key: text}`` of the files a rule module names in ``ROLE_FILES`` (``{key: path in roles/<role>/}``, or in
    the collection for a path under ``plugins/``): files the role ships that a plan writes with their full content
    (a script copied to the node, the rule modules it imports), read once per process
    on the controller so that the plan stays pure (it gets them as ``context['role_files']``)."""
    module = rules(role)
    if role not in _ROLE_FILES:
        texts = {}
        for key, relative in sorted(getattr(module, 'ROLE_FILES', {}).items()):
            # a path under plugins/ is the collection's own module_utils (a rule a boot script imports on the node)
            path = os.path.join(COLLECTION_ROOT, relative) if relative.startswith('plugins/') else os.path.join(
                COLLECTION_ROOT, 'roles', role, relative)
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
