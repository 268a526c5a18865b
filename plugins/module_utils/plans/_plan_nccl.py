# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The nccl role's plan (see plans/_plan.py for the plan's shape): /etc/nccl.conf and the PyTorch profile.d file, each
rendered once with its full content and compared with the gathered file state by SHA-1.

The NCCL rules (the names NCCL and PyTorch read, how a value is written, what is refused) live in rules/_nccl.py; the
choice of the training network's interfaces in _nic_selection.select_nics.  The readiness check ``nccl.config`` is this
plan's drift: it passes exactly when the files the role manages hold the wanted content.  Nothing here decodes a
file of the node (only its SHA-1 is compared), so no byte in /etc/nccl.conf can break a plan or a check.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

try:
    from shlex import quote as shell_quote
except ImportError:  # Python 2 (sanity's compile test)
    from pipes import quote as shell_quote  # pylint: disable=deprecated-module

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _nccl
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _gpu_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._nic_selection import (
    NicError,
    parse_networks,
    select_nics,
    valid_networks,
)

ROLE = 'nccl'
CHECK = 'nccl.config'
CHECKS = (CHECK,)
MODE = '0644'

SETTINGS = {
    'nodeprep_nccl_conf': {
        'type': 'dict', 'default': {},
        'description': ['NCCL variables (name to value) written to O(nodeprep_nccl_conf_path) as C(NAME=VALUE) lines, '
                        'for example V({NCCL_IB_HCA: "=mlx5_0,mlx5_1", NCCL_DEBUG: WARN}). Booleans are written as '
                        'V(1)/V(0).',
                        'Empty, with O(nodeprep_nccl_socket_networks) empty too, leaves the file alone.']},
    'nodeprep_nccl_strict': {
        'type': 'bool', 'default': False,
        'description': ['Fail instead of warning on names that nothing reads (such as V(NCCL_TIMEOUT) or '
                        'V(PYTORCH_ENABLE_FP8)) or that are in the wrong file.']},
    'nodeprep_nccl_extra_names': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': 'Names to accept besides the built-in list (for variables of newer NCCL or PyTorch '
                       'releases).'},
    'nodeprep_nccl_socket_networks': {
        'type': 'list', 'elements': 'str', 'default': [],
        'description': ['Training network(s) in CIDR notation. The interfaces with an address inside them become '
                        'C(NCCL_SOCKET_IFNAME), written as an exact-match list (for example V(=ens1f0np0,ens1f1np1)). '
                        'The role fails when none matches.',
                        'Uses the C(nic) facts of M(gpufleet.nodeprep.gpu_node_facts).']},
    'nodeprep_nccl_torch_env': {
        'type': 'dict', 'default': {},
        'description': ['PyTorch ProcessGroupNCCL variables (C(TORCH_NCCL_*), name to value) exported for login '
                        'shells through the profile.d file O(nodeprep_nccl_torch_env_path).',
                        'PyTorch reads them at start-up, before NCCL reads C(/etc/nccl.conf), so they do not belong '
                        'there. Empty leaves the file alone.']},
    'nodeprep_nccl_conf_path': {
        'type': 'path', 'default': '/etc/nccl.conf',
        'description': 'The NCCL configuration file.'},
    'nodeprep_nccl_torch_env_path': {
        'type': 'path', 'default': '/etc/profile.d/nodeprep-torch-nccl.sh',
        'description': 'The profile.d file for the PyTorch variables.'},
}
# The collection-wide nodeprep_gpu_node: the role does nothing on a node that is not a GPU node (rules/_gpu_node.py).
SETTINGS.update(_gpu_node.SETTINGS)

TORCH_ENV_HEADER = (
    '# gpufleet.nodeprep.nccl: PyTorch ProcessGroupNCCL settings for login shells. Batch systems and containers\n'
    '# that do not start a login shell need them in their own environment.\n'
)


def conf_managed(settings):
    """Whether the role writes /etc/nccl.conf (something is configured); else the file is left alone."""
    return bool(settings['nodeprep_nccl_conf']) or bool(settings['nodeprep_nccl_socket_networks'])


def gather(settings):
    request = _plan.new_gather()
    # The conf file always: readiness says whether an unmanaged file is there.
    request['files'] = [settings['nodeprep_nccl_conf_path']]
    if settings['nodeprep_nccl_torch_env']:
        request['files'].append(settings['nodeprep_nccl_torch_env_path'])
    if settings['nodeprep_nccl_socket_networks']:
        request['subsets'] = ['nic']
        if valid_networks(settings['nodeprep_nccl_socket_networks']):
            # With a bad network every NIC is read, and the plan refuses the value in its own words.
            request['nic_networks'] = list(settings['nodeprep_nccl_socket_networks'])
    return request


def render_torch_env(values):
    """The profile.d file: the managed line, what it is for, then ``export NAME=<shell-quoted value>`` sorted."""
    lines = [_plan.managed_line(ROLE) + '\n', TORCH_ENV_HEADER]
    lines.extend('export {0}={1}\n'.format(name, shell_quote(values[name])) for name in sorted(values))
    return ''.join(lines)


def _addresses(nics):
    parts = []
    for name in sorted(nics):
        addresses = (nics[name] or {}).get('addresses') if isinstance(nics[name], dict) else None
        addresses = addresses if isinstance(addresses, dict) else {}
        found = [str(a) for family in ('ipv4', 'ipv6') for a in addresses.get(family) or []]
        parts.append('{0} {1}'.format(name, ', '.join(found) if found else 'no address'))
    return '; '.join(parts) or 'no interface reported'


def _nccl_rules(conf, torch_env, extra_names):
    """The NCCL rules (_nccl.py) over the settings as given: ``errors`` (values no file may hold: refused),
    ``torch_env`` (the PyTorch values as text) and ``problems`` (names nothing reads or in the wrong file)."""
    out = {'errors': [], 'torch_env': {}, 'problems': []}
    try:
        if conf:
            _nccl.effective_conf(conf)
    except _nccl.NcclError as exc:
        out['errors'].append(str(exc))
    try:
        out['torch_env'] = _nccl.torch_env_values(torch_env)
    except _nccl.NcclError as exc:
        out['errors'].append(str(exc))
    try:
        out['problems'] = _nccl.name_problems(conf if isinstance(conf, dict) else {},
                                              torch_env if isinstance(torch_env, dict) else {}, extra_names)
    except _nccl.NcclError as exc:
        out['errors'].append(str(exc))
    return out


def _check_settings(plan, settings):
    """Problems of the settings as given; returns (conf, torch_env values, name warnings)."""
    conf = settings['nodeprep_nccl_conf']
    torch_env = settings['nodeprep_nccl_torch_env']
    networks = settings['nodeprep_nccl_socket_networks']
    checked = _nccl_rules(conf, torch_env, settings['nodeprep_nccl_extra_names'])
    plan['problems'].extend(checked['errors'])
    if networks:
        try:
            parse_networks(networks, 'nodeprep_nccl_socket_networks')
        except NicError as exc:
            plan['problems'].append('{0} (allowed: a list of CIDR networks such as 10.20.0.0/16)'.format(exc))
        if 'NCCL_SOCKET_IFNAME' in conf:
            _plan.add_problem(plan, 'nodeprep_nccl_conf.NCCL_SOCKET_IFNAME', conf['NCCL_SOCKET_IFNAME'],
                              'not together with nodeprep_nccl_socket_networks={0}, which derives it (choose '
                              'one)'.format(_plan.show(networks)))
    warnings = checked['problems']
    if warnings and settings['nodeprep_nccl_strict']:
        plan['problems'].extend('{0} (refused: nodeprep_nccl_strict is true)'.format(w) for w in warnings)
        warnings = []
    return checked['torch_env'], warnings


def _socket_ifnames(plan, facts, settings, context):
    """The training network's interfaces, or None when not derived or when they cannot be known (then the
    plan has an error)."""
    networks = settings['nodeprep_nccl_socket_networks']
    if not networks:
        return None
    errors = facts.get('nodeprep_errors') if isinstance(facts.get('nodeprep_errors'), dict) else {}
    nics = facts.get('nics')
    if errors.get('nic') or not isinstance(nics, dict):
        why = errors.get('nic') or 'the nic facts hold no interfaces'
        plan['errors'].append('the NIC facts of {0} could not be read, so NCCL_SOCKET_IFNAME for '
                              'nodeprep_nccl_socket_networks={1} is not known: {2}'.format(
                                  context.get('host') or 'this node', _plan.show(networks), why))
        return None
    try:
        chosen = select_nics(nics, networks=networks, what='nodeprep_nccl_socket_networks')
    except NicError as exc:
        plan['errors'].append('the NIC facts of {0} cannot be used: {1}'.format(
            context.get('host') or 'this node', exc))
        return None
    if not chosen:
        plan['errors'].append('nodeprep_nccl_socket_networks={0} matches no interface on {1}; its addresses: '
                              '{2}'.format(_plan.show(networks), context.get('host') or 'this node',
                                           _addresses(nics)))
        return None
    return chosen


def _expected(settings, values, torch_values):
    parts = []
    if values is not None:
        parts.append('{0} with {1}; only names NCCL reads'.format(
            settings['nodeprep_nccl_conf_path'],
            ', '.join('{0}={1}'.format(k, values[k]) for k in sorted(values)) or 'no setting'))
    if torch_values:
        parts.append('{0} exporting {1}'.format(settings['nodeprep_nccl_torch_env_path'],
                                                ', '.join(sorted(torch_values))))
    return '; '.join(parts)


def plan(facts, settings, context):
    facts = facts or {}
    plan = _plan.new_plan(ROLE)
    conf_path = settings['nodeprep_nccl_conf_path']
    torch_path = settings['nodeprep_nccl_torch_env_path']
    managed = conf_managed(settings)
    torch_values, warnings = _check_settings(plan, settings)
    wanted_words = '{0} as the nccl role writes it'.format(conf_path)
    if plan['problems']:
        _plan.set_check(plan, CHECK, wanted_words)
        return plan
    ifnames = _socket_ifnames(plan, facts, settings, context)
    if plan['errors']:
        _plan.set_check(plan, CHECK, wanted_words)
        for error in plan['errors']:
            _plan.add_drift(plan, CHECK, error, fixable=False)
        return plan
    values = _nccl.effective_conf(settings['nodeprep_nccl_conf'], ifnames) if managed else None
    if warnings:
        plan['reports'].append('WARNING: written anyway (set nodeprep_nccl_strict=true to refuse): ' +
                               '; '.join(warnings))
        _plan.add_drift(plan, CHECK, 'names nothing reads: ' + '; '.join(warnings), fixable=False, level='warn')
    if not managed and not torch_values:
        files = facts.get('nodeprep_files') if isinstance(facts.get('nodeprep_files'), dict) else {}
        state = files.get(conf_path)
        exists = isinstance(state, dict) and state.get('exists')
        words = 'not managed: nodeprep_nccl_conf, nodeprep_nccl_socket_networks and nodeprep_nccl_torch_env are empty'
        if exists:
            _plan.set_check(plan, CHECK, words, '{0} exists and is left alone'.format(conf_path))
        else:
            _plan.set_check(plan, CHECK, words, skip='{0} does not exist and nothing is configured'.format(conf_path))
        return plan
    if managed:
        _plan.want_path(plan, facts, conf_path, content=_nccl.render_conf(settings['nodeprep_nccl_conf'], ifnames),
                        mode=MODE, check=CHECK)
    if torch_values:
        _plan.want_path(plan, facts, torch_path, content=render_torch_env(torch_values), mode=MODE, check=CHECK)
    observed = ', '.join(entry['path'] for entry in plan['files'] if not entry['change'])
    _plan.set_check(plan, CHECK, _expected(settings, values, torch_values),
                    '{0}: as wanted'.format(observed) if observed else '')
    return plan
