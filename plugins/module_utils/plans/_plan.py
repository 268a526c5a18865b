# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The one plan per role and node: its shape, and the helpers every role's rule module shares.

Each role that plans in Python has a rule module ``_plan_<role>.py`` next to this file with:

``ROLE``
    the role's name (``'shm'``).
``SETTINGS``
    ``{variable name: argument spec}`` (``type``, ``default``, ``elements``, ``choices``, ``description``): the one
    source of the role's variables.  ``defaults/main.yml`` and ``meta/argument_specs.yml`` are checked against it
    (tests/unit/roles/test_role_settings.py).  The ``gpufleet.nodeprep.node_plan`` action types every variable with
    Ansible's own validator from this spec before any plan sees it: ``-e nodeprep_shm_fstab=false`` arrives as
    ``False``, a comma-separated string given for a list as a list.
``ROLE_FILES`` (optional)
    ``{key: path in roles/<role>/}`` (or a path under ``plugins/`` of the collection: a rule module a boot script
    imports on the node): files the role ships that the plan writes with their full content (a script).
    The controller reads them once (plugin_utils/_plans.role_files) and hands them to ``plan`` as
    ``context['role_files'][key]``, so that the plan compares them by SHA-1 like any file it renders, and stays pure.
``gather(settings)``
    what the one gather (``gpu_node_facts``) must read for this role: a dict made by :func:`new_gather`.
``plan(facts, settings, context)``
    the plan (a dict made by :func:`new_plan`), from the gathered facts (``ansible_facts``), the typed settings and
    the run's context (:func:`new_context`).  Pure: it reads nothing else and changes nothing.

The plan's keys:

``problems``
    the settings that cannot be used, each naming the variable, the value given and what is allowed.  A role whose
    plan has problems fails on the node and changes nothing there.
``errors``
    what makes the role fail on this node although the settings are right (no interface on the training network,
    ``/dev/shm`` not a tmpfs): the role fails there, changing nothing.
``missing``
    facts the plan needs that were not gathered (the action gathers them and plans again).
``reasons``
    why the role's work must run; empty when there is nothing to do.
``drift``
    what is not as wanted, ``{'check': readiness check id, 'msg': words a person reads, 'level': 'fail' or 'warn',
    'fixable': whether a run of the role changes it}``.  The readiness check of that id passes exactly when the
    role's plan has no drift (and no problem) for it.  Drift no run of the role can fix (a full ``/dev/shm``, a power
    cap set out of band) is not a reason to run.
``checks``
    per readiness check id the role owns: ``{'expected': ..., 'observed': ..., 'skip': None or why the check does
    not apply on this node}``, the words of the readiness report.
``reports``
    what the role says on the node even when it has nothing to do (a larger ``/dev/shm`` kept, no NIC matched).
``files``
    every file, directory and link the role manages, with its full content: ``{path, state, content, mode, owner,
    group, src, change}``; ``change`` is None when the gathered state already matches, else the reason.  The tasks
    write exactly this content.
``units``, ``args``
    the systemd units, and the module arguments per task (``args['mount_fstab']``, ``args['nvidia_gpu']``...).
``reboot``
    ``{'needed': bool, 'why': [...]}``.
``run``
    why the role's play runs on the node (filled by :func:`finish`): problems, errors, missing facts, reports and
    reasons.  site.yml runs a role's play only where this is not empty.
``gpu_node``, ``gpu_skip`` (GPU roles only, _gpu_node.GPU_ROLES)
    the node's GPU decision (``{'gpu': bool, 'why': ...}``) and, on a node that is not a GPU node, the one line that
    says so (then the plan has no work, and ``run`` holds only settings problems).

Pure functions; no Ansible import (Python 3.6+: the readiness module may import the rule modules on the node).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy
import hashlib
import json

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._node_records import GLOB_CHARS, unit_name
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._path_changes import path_change

# The fact namespace each gather subset of gpu_node_facts fills.
SUBSET_NAMESPACES = {'nvidia': 'nvidia', 'kernel': 'kernel_state', 'limits': 'limits', 'shm': 'shm', 'nic': 'nics',
                     'imex': 'imex'}
# Subsets read only where a role's plan asks for them (gpu_node_facts' gather_subset: all leaves them out too):
# nvidia-imex-ctl -N asks every node of the IMEX domain, so a node outside one is never made to run it.
ASKED_ONLY_SUBSETS = ('imex',)

# The gather request's list keys and the fact each is reported under.
_GATHER_LISTS = ('subsets', 'units', 'files', 'packages', 'contents', 'limits_users', 'limits_services',
                 'nic_networks', 'nic_nm_properties')
# The gather request's single values (the first request that gives one wins when requests are merged).
_GATHER_VALUES = ('shm_path', 'imex_config', 'imex_timeout')

# The first line of every file a role renders: the files are compared by content, so it names no date or host.
MANAGED = 'Managed by gpufleet.nodeprep ({0}); local changes are overwritten.'


def managed_line(role, comment='#'):
    """The header line of a file that ``role`` writes."""
    return '{0} {1}'.format(comment, MANAGED.format(role))


def show(value):
    """A setting's value as the user wrote it, for messages (JSON: strings quoted, None as null)."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def new_context(host='', check_mode=False, driver_pending=None, extra=None):
    """The run's context a plan may read: the host's name (for messages), check mode, and what the nvidia_driver
    role predicted in this check run (``{'persistenced': bool}`` or None)."""
    context = {'host': host or '', 'check_mode': bool(check_mode), 'driver_pending': driver_pending}
    context.update(extra or {})
    return context


def new_gather():
    """An empty gather request (the arguments of gpu_node_facts a role needs)."""
    request = dict((key, []) for key in _GATHER_LISTS)
    for key in _GATHER_VALUES:
        request[key] = None
    return request


def merge_gathers(requests):
    """One gather request for several roles: the union of the lists, in order; the first shm_path (imex_config,
    imex_timeout) given."""
    merged = new_gather()
    for request in requests:
        for key in _GATHER_LISTS:
            for item in request.get(key) or []:
                if item not in merged[key]:
                    merged[key].append(item)
        for key in _GATHER_VALUES:
            if merged[key] is None and request.get(key):
                merged[key] = request[key]
    return merged


def _gathered_subsets(facts):
    gathered = facts.get('nodeprep_gathered') or []
    return [subset for subset in SUBSET_NAMESPACES if subset in gathered
            and isinstance(facts.get(SUBSET_NAMESPACES[subset]), dict)]


def missing_facts(request, facts):
    """What ``request`` asks for that ``facts`` (ansible_facts) do not hold yet, as a gather request (empty lists
    when everything is there).  A glob in ``files`` counts as gathered once a gather of this collection recorded it
    in ``nodeprep_file_patterns``."""
    facts = facts or {}
    missing = new_gather()
    have_subsets = _gathered_subsets(facts)
    missing['subsets'] = [s for s in request.get('subsets') or [] if s not in have_subsets]
    units = facts.get('nodeprep_units')
    units = units if isinstance(units, dict) else {}
    missing['units'] = [u for u in request.get('units') or [] if unit_name(u) not in units]
    files = facts.get('nodeprep_files')
    files = files if isinstance(files, dict) else {}
    patterns = facts.get('nodeprep_file_patterns') or []
    missing['files'] = [path for path in request.get('files') or []
                        if (path not in patterns if any(c in path for c in GLOB_CHARS) else path not in files)]
    for key, fact in (('packages', 'nodeprep_packages'), ('contents', 'nodeprep_contents')):
        have = facts.get(fact)
        have = have if isinstance(have, dict) else {}
        missing[key] = [name for name in request.get(key) or [] if name not in have]
    limits = facts.get('limits') if isinstance(facts.get('limits'), dict) else None
    if request.get('limits_users') or request.get('limits_services'):
        effective = (limits or {}).get('effective') or {}
        services = ((limits or {}).get('systemd') or {}).get('services') or {}
        missing['limits_users'] = [u for u in request.get('limits_users') or [] if u not in effective]
        missing['limits_services'] = [s for s in request.get('limits_services') or [] if s not in services]
        if (missing['limits_users'] or missing['limits_services']) and 'limits' not in missing['subsets']:
            missing['subsets'].append('limits')
    if request.get('nic_nm_properties') and isinstance(facts.get('nics'), dict):
        # A NIC NetworkManager manages must carry its connection with every property asked for.
        read = [(nic.get('nm_connection') or {}) for nic in facts['nics'].values()
                if isinstance(nic, dict) and nic.get('nm_managed')]

        def lacks(conn, prop):
            return not conn or bool(conn.get('name') and not conn.get('error')
                                    and prop not in (conn.get('properties') or {}))
        missing['nic_nm_properties'] = [prop for prop in request['nic_nm_properties']
                                        if any(lacks(conn, prop) for conn in read)]
        if missing['nic_nm_properties'] and 'nic' not in missing['subsets']:
            missing['subsets'].append('nic')
    if request.get('shm_path') and isinstance(facts.get('shm'), dict) and 'shm' in have_subsets:
        if facts['shm'].get('path') not in (None, request['shm_path']) and 'shm' not in missing['subsets']:
            missing['subsets'].append('shm')
    if request.get('imex_config') and isinstance(facts.get('imex'), dict) and 'imex' in have_subsets:
        if facts['imex'].get('config_path') not in (None, request['imex_config']) and 'imex' not in missing['subsets']:
            missing['subsets'].append('imex')
    return missing


def is_empty(request):
    return not any(request.get(key) for key in _GATHER_LISTS)


def describe_missing(request):
    """``missing`` of a plan: one phrase per kind of fact still to gather."""
    out = []
    for key in _GATHER_LISTS:
        if request.get(key):
            out.append('{0}: {1}'.format(key, ', '.join(str(item) for item in request[key])))
    return out


def new_plan(role):
    return {'role': role, 'problems': [], 'errors': [], 'missing': [], 'reasons': [], 'drift': [], 'checks': {},
            'reports': [], 'files': [], 'units': [], 'args': {}, 'reboot': {'needed': False, 'why': []}, 'run': []}


def set_check(plan, check, expected, observed='', skip=None):
    """The report's words for readiness check ``check``: what is wanted, what was seen, or why it does not apply."""
    plan['checks'][check] = {'expected': expected, 'observed': observed, 'skip': skip}


def add_problem(plan, name, value, allowed):
    """A setting that cannot be used: ``name=value: allowed``."""
    plan['problems'].append('{0}={1}: {2}'.format(name, show(value), allowed))


def add_drift(plan, check, msg, fixable=True, level='fail'):
    """Something that is not as wanted: readiness check ``check`` fails (``level`` 'fail') or warns ('warn') with
    ``msg``.  Drift a run of the role fixes (``fixable``) is also a reason to run the role."""
    plan['drift'].append({'check': check, 'msg': msg, 'level': level, 'fixable': bool(fixable)})
    if fixable and msg not in plan['reasons']:
        plan['reasons'].append(msg)


def sha1_text(text):
    """The SHA-1 gpu_node_facts reports for a file whose content is ``text`` (UTF-8)."""
    # SHA-1 because gpu_node_facts reports it (it identifies content only).
    return hashlib.sha1(text.encode('utf-8')).hexdigest()  # nosec B324


def want_path(plan, facts, path, state='file', content=None, mode=None, src=None, owner='root', group='root',
              check=None):
    """Add one managed path to the plan; compare it with its gathered state (``ansible_facts.nodeprep_files``).

    A change is a reason to run, and drift for readiness check ``check`` when one is given.  Returns the entry.
    """
    files = facts.get('nodeprep_files') if isinstance(facts.get('nodeprep_files'), dict) else {}
    want = {'path': path, 'state': state}
    if mode is not None:
        want['mode'] = mode
    if state == 'file':
        want['sha1'] = sha1_text(content or '')
    if state == 'link':
        want['src'] = src
    change = path_change(files.get(path), want)
    entry = {'path': path, 'state': state, 'content': content, 'mode': mode, 'src': src, 'owner': owner,
             'group': group, 'change': change}
    plan['files'].append(entry)
    if change:
        if check:
            add_drift(plan, check, change)
        elif change not in plan['reasons']:
            plan['reasons'].append(change)
    return entry


def judge_check(plan, check, status, expected, observed):
    """Readiness check ``check`` of ``plan`` from the rule that judges the node's state for it (``status``,
    ``expected``, ``observed``: a readiness rule's verdict, such as rules/_rdma.acs_result): its words; a failure that
    the plan's own work and refusals do not already name becomes drift no run of the role fixes, so that the check
    fails exactly when the plan says why.  Call it after the plan has added its work for ``check``."""
    if status == 'skip':
        set_check(plan, check, expected, skip=observed)
        return
    set_check(plan, check, expected, observed if status == 'pass' else '')
    if status == 'fail' and not drift_for(plan, check, 'fail') or status == 'warn' and not drift_for(plan, check):
        add_drift(plan, check, observed, fixable=False, level=status)


def drift_for(plan, check, level=None):
    """The drift messages of ``plan`` for readiness check ``check`` (of one ``level`` when given)."""
    return [item['msg'] for item in plan.get('drift') or []
            if item.get('check') == check and (level is None or item.get('level', 'fail') == level)]


def fixable_drift(plan):
    """The drift a run of the role would fix (what its reasons must cover)."""
    return [item for item in plan.get('drift') or [] if item.get('fixable', True)]


def finish(plan):
    """Fill ``run``: why the role's play runs on the node (empty: nothing to do and nothing to say).  A GPU role on a
    node that is not a GPU node (``gpu_skip``) runs only to refuse settings it cannot use."""
    run = []
    if plan['problems']:
        run.append('invalid settings: ' + '; '.join(plan['problems']))
    if plan.get('gpu_skip'):
        plan['run'] = run
        return plan
    run.extend(plan['errors'])
    if plan['missing']:
        run.append('facts to gather: ' + '; '.join(plan['missing']))
    run.extend(plan['reports'])
    run.extend(reason for reason in plan['reasons'] if reason not in run)
    plan['run'] = run
    return plan


def role_gather(module, settings):
    """What the role whose rule module is ``module`` must gather: its own ``gather``, and for a GPU role whose
    ``nodeprep_gpu_node`` is auto the kernel subset (the PCI scan the GPU rule reads, in the same round trip) when it
    gathers anything at all (a role whose settings ask for nothing has no work to keep off a node; readiness gathers
    the PCI scan itself)."""
    request = module.gather(settings)
    if module.ROLE in _gpu_node.GPU_ROLES and _gpu_node.needs_pci(settings.get(_gpu_node.NAME)) \
            and not is_empty(request):
        request = merge_gathers([request, {'subsets': ['kernel']}])
    return request


def plan_with(module, facts, settings, problems=(), context=None):
    """The finished plan of the role whose rule module is ``module`` (``run`` filled): the typing ``problems`` of its
    settings first (then nothing else is planned), the facts its ``gather`` asks for that ``facts`` lack (then only
    that is said: what was planned from missing facts is not the node's state).  A GPU role's plan then goes through
    the GPU rule (_gpu_node.apply): on a node that is not a GPU node it has no work and says so in one line."""
    context = context if context is not None else new_context()
    missing = missing_facts(role_gather(module, settings), facts)
    plan = new_plan(module.ROLE) if problems else module.plan(facts, settings, context)
    plan['problems'] = list(problems) + [p for p in plan['problems'] if p not in problems]
    plan['missing'] = describe_missing(missing)
    if plan['missing']:
        plan['reasons'] = []
        plan['files'] = []
        plan['args'] = {}
        plan['drift'] = [{'check': check, 'msg': 'not gathered: ' + '; '.join(plan['missing']), 'level': 'fail',
                          'fixable': False} for check in getattr(module, 'CHECKS', ())]
    if module.ROLE in _gpu_node.GPU_ROLES:
        _gpu_node.apply(plan, _gpu_node.decide(facts, settings.get(_gpu_node.NAME, _gpu_node.AUTO)),
                        getattr(module, 'CHECKS', ()))
        if plan['gpu_skip']:
            plan['missing'] = []
    plan['settings'] = settings
    return finish(plan)


def defaults(module):
    """The default of every setting of a rule module (what a role imported with its defaults plans with)."""
    return dict((name, copy.deepcopy(spec.get('default'))) for name, spec in module.SETTINGS.items())
