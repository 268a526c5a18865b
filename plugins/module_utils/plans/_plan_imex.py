# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The imex role's settings and its plan (see _plan.py for the plan's shape): the NVIDIA IMEX domain of a multi-node
NVLink system (GB200/GB300 NVL72).  Opt-in: nothing happens until ``nodeprep_imex_domain_group`` names the inventory
group of the node's NVLink domain.

* every node of the group gets the same ``nodes_config.cfg`` (the file the daemon's config names in
  ``IMEX_NODE_CONFIG_FILE``): the members' addresses in ascending order (rules/_imex.py);
* ``nvidia-imex`` enabled, running, and restarted when that file changes (the daemon reads it at start: NVIDIA IMEX
  guide, "IMEX Service Config Options");
* with ``nodeprep_imex_channels: static``, ``/dev/nvidia-caps-imex-channels/channel0`` made now and at every boot by
  ``nodeprep-imex-channels.service`` (the channel "will not persist through a reboot"); with ``slurm``, none: Slurm's
  switch/nvidia_imex makes one per job in the job's own /dev (docs/roles/imex.md);
* the readiness check ``imex.domain`` is this plan's drift: the files, the service, the channel, the GPUs' NVLink
  clique against the group's, and the domain as ``nvidia-imex-ctl -N -j`` shows it (every peer READY and CONNECTED,
  the domain UP), naming each peer that is not.

The members of the group, their addresses and (when this run gathered them) their GPUs' fabric blocks come from the
inventory through the run's context (``context['imex_members']``, made by the gpufleet.nodeprep.node_plan action):
the plan stays pure.  The nvidia-imex package itself is the nvidia_driver role's (``nodeprep_nvidia_driver_imex``: it
is installed at the driver's exact version); this role refuses a node without it.

Pure functions; no Ansible import; Python 3.6 compatible.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import posixpath

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans._plan_gpu_settings import (
    PLATFORM_PYTHON,
    platform_python,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._imex_formats import (
    CONFIG_PATH,
    nodes_config_path,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _imex
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._path_changes import path_change

ROLE = 'imex'
CHECK = 'imex.domain'
CHECKS = (CHECK,)
PREFIX = 'nodeprep_imex_'
SERVICE = 'nvidia-imex.service'
CHANNEL_UNIT = 'nodeprep-imex-channels.service'
SCRIPT = '/usr/local/sbin/nodeprep-imex-channels'
UNIT_DIR = '/etc/systemd/system'
UNIT_PATH = posixpath.join(UNIT_DIR, CHANNEL_UNIT)
UNIT_LINK = posixpath.join(UNIT_DIR, 'multi-user.target.wants', CHANNEL_UNIT)
CHANNEL_MODES = ('static', 'slurm')

ROLE_FILES = {'script': 'files/nodeprep-imex-channels'}

SETTINGS = {
    PREFIX + 'domain_group': {
        'type': 'str', 'default': None,
        'description': [
            'The inventory group whose hosts form this node\'s NVLink domain (one IMEX domain; on GB200/GB300 NVL72 '
            'the compute trays of one rack, or of one NVLink partition). Every host of the group gets the same '
            'C(nodes_config.cfg): the addresses of all of them, in ascending order.',
            'Set it where the group is defined (C(group_vars/rack07.yml): V(rack07)). V(null) (the default) leaves '
            'IMEX alone and the readiness check C(imex.domain) skips.',
            'The GPUs\' NVLink clique (C(nvidia-smi -q): cluster UUID and clique id) checks the group: a member in '
            'another clique fails C(imex.domain). The group, not the clique, decides who is in the domain, so a tray '
            'that is down stays in every peer\'s list (docs/roles/imex.md).']},
    PREFIX + 'address': {
        'type': 'str', 'default': None,
        'description': [
            'This host\'s IMEX address (IPv4 or IPv6), the one its peers reach its C(nvidia-imex) at (TCP 50000, '
            'the command service 50005). V(null) takes C(ansible_host), else the inventory name; either must be an '
            'address, not a host name.',
            'Every member of the domain group is read for it (its own value, set per host), so each node writes '
            'the same list.']},
    PREFIX + 'channels': {
        'type': 'str', 'default': 'static', 'choices': list(CHANNEL_MODES),
        'description': [
            'How CUDA\'s fabric-memory calls get an IMEX channel. V(static) - C(/dev/nvidia-caps-imex-channels/'
            'channel0) (mode 0666, the major the driver registered in C(/proc/devices)), made now and at every '
            'boot by C(nodeprep-imex-channels.service): every user on the node shares channel 0.',
            'V(slurm) - Slurm 24.05 or later with C(SwitchType=switch/nvidia_imex) makes one channel per job in the '
            'job\'s own C(/dev) (and slurmd empties C(/dev/nvidia-caps-imex-channels) when it starts): the role '
            'makes none, and removes its boot unit.']},
    PREFIX + 'restart': {
        'type': 'bool', 'default': True,
        'description': [
            'Restart C(nvidia-imex) when its node list changes (it reads the list only when it starts).',
            'A restart ends what running jobs imported over NVLink from other nodes; with V(false) the role writes '
            'the list and reports the restart as pending (C(imex.domain) warns) for a drained node.']},
    PREFIX + 'config': {
        'type': 'path', 'default': CONFIG_PATH,
        'description': 'The IMEX daemon\'s config file (the nvidia-imex package ships it); its C(IMEX_NODE_CONFIG_FILE) '
                       'names the node list the role writes. The role reads it and never changes it.'},
    PREFIX + 'ctl_timeout': {
        'type': 'int', 'default': 30,
        'description': 'Seconds C(nvidia-imex-ctl -N -j) may take (it asks every node of the domain) before it is '
                       'killed and C(imex.domain) fails with the timeout.'},
}


def _s(settings, name):
    return settings[PREFIX + name]


def gather(settings):
    request = _plan.new_gather()
    if not _s(settings, 'domain_group'):
        return request
    request['subsets'] = ['imex', 'nvidia']
    request['units'] = [SERVICE, CHANNEL_UNIT]
    request['files'] = [PLATFORM_PYTHON, SCRIPT, UNIT_PATH, UNIT_LINK]
    request['imex_config'] = _s(settings, 'config')
    request['imex_timeout'] = _s(settings, 'ctl_timeout')
    return request


def check_settings(plan, settings):
    group = _s(settings, 'domain_group')
    if group is not None and not str(group).strip():
        _plan.add_problem(plan, PREFIX + 'domain_group', group, 'the name of an inventory group, or null to leave '
                          'IMEX alone')
    address = _s(settings, 'address')
    if address not in (None, ''):
        try:
            _imex.parse_address(address, PREFIX + 'address')
        except _imex.DomainError:
            _plan.add_problem(plan, PREFIX + 'address', address, 'an IPv4 or IPv6 address (not a host name), or '
                              'null for ansible_host')
    timeout = _s(settings, 'ctl_timeout')
    if timeout is None or timeout < 1:
        _plan.add_problem(plan, PREFIX + 'ctl_timeout', timeout, 'a whole number of seconds, at least 1')
    # nodeprep_imex_config is a path setting: the typing (plugin_utils/_plans.py) refuses what is not an absolute path.


def _units(facts):
    units = facts.get('nodeprep_units')
    return units if isinstance(units, dict) else {}


def _gpus(facts):
    nvidia = facts.get('nvidia') if isinstance(facts.get('nvidia'), dict) else {}
    return nvidia.get('gpus') or []


def _not_configured(out, facts, host):
    clique, dummy = _imex.clique_of(_gpus(facts))
    why = 'nodeprep_imex_domain_group is not set'
    if clique:
        why += ' (this node\'s GPUs are in NVLink clique {0}: multi-node NVLink needs IMEX)'.format(clique)
    _plan.set_check(out, CHECK, 'not managed (nodeprep_imex_domain_group is not set)', skip=why)
    return out


def _fail(out, text):
    """A condition the role fails on (no run of it fixes it here): an error, and drift of the check."""
    out['errors'].append(text)
    _plan.add_drift(out, CHECK, text, fixable=False)


def plan(facts, settings, context):
    out = _plan.new_plan(ROLE)
    check_settings(out, settings)
    if out['problems']:
        return out
    host = context.get('host') or 'this node'
    group = _s(settings, 'domain_group')
    if not group:
        return _not_configured(out, facts, host)
    members = context.get('imex_members')
    if not isinstance(members, dict) or members.get('group') != group:
        _fail(out, 'the members of the IMEX domain group {0!r} were not handed to the plan (the '
                   'gpufleet.nodeprep.node_plan and readiness_info actions read them from the inventory)'.format(group))
        return out
    peers, errors = _imex.domain_peers(members, context.get('host'))
    for error in errors:
        _fail(out, error)
    if errors:
        return out
    own = [p for p in peers if p['host'] == context.get('host')][0]
    addresses = [p['address'] for p in peers]
    channels_mode = _s(settings, 'channels')
    expected = 'nvidia-imex running with the {0} nodes of group {1} in address order ({2}), the domain UP with every ' \
        'peer READY and CONNECTED; {3}'.format(
            len(peers), group, ', '.join('{0} {1}'.format(p['host'], p['address']) for p in peers),
            'channel0 at every boot' if channels_mode == 'static' else 'channels per job (Slurm switch/nvidia_imex)')

    imex = facts.get('imex') if isinstance(facts.get('imex'), dict) else {}
    # Installed: systemd knows the unit the package ships (the package database of a node is not asked: the gather
    # reads units in the same systemctl call it makes anyway).
    unit = _units(facts).get(SERVICE) or {}
    installed = unit.get('load') == 'loaded'
    pending = context.get('check_mode') and bool((context.get('driver_pending') or {}).get('imex'))
    if not installed and not pending:
        _plan.set_check(out, CHECK, expected, 'nvidia-imex is not installed')
        state = unit.get('load') or 'not known'
        _fail(out, 'nvidia-imex is not installed on {0} ({1} is {2}): set nodeprep_nvidia_driver_imex: true (role '
                   'nvidia_driver installs it at the driver\'s version)'.format(host, SERVICE, state))
        return out
    predicting = not installed

    # The node list.
    config = imex.get('config')
    if imex.get('config_error'):
        _fail(out, 'cannot read the IMEX config {0}: {1}'.format(_s(settings, 'config'), imex['config_error']))
        return out
    if config is None and not predicting:
        _fail(out, '{0} does not exist: the nvidia-imex package ships it (reinstall it, or set nodeprep_imex_config '
                   'to the config nvidia-imex.service starts with)'.format(_s(settings, 'config')))
        return out
    nodes_path = imex.get('nodes_path') or nodes_config_path(config)
    text = _imex.nodes_config_text(addresses)
    want = {'path': nodes_path, 'state': 'file', 'sha1': _plan.sha1_text(text), 'mode': '0644'}
    change = path_change(imex.get('nodes_file') if not predicting else {'exists': False}, want)
    out['files'].append({'path': nodes_path, 'state': 'file', 'content': text, 'mode': '0644', 'src': None,
                         'owner': 'root', 'group': 'root', 'change': change})
    if change:
        _plan.add_drift(out, CHECK, '{0} (wanted: {1})'.format(change, ', '.join(addresses)))
    cmd_enabled = (config or {}).get('IMEX_CMD_ENABLED', '1') if config is not None else '1'
    if cmd_enabled.strip() != '1':
        _plan.add_drift(out, CHECK, '{0}: IMEX_CMD_ENABLED={1}: nvidia-imex-ctl -N cannot read the domain (set '
                        'IMEX_CMD_ENABLED=1 with IMEX_CMD_PORT in the config)'.format(_s(settings, 'config'),
                                                                                      cmd_enabled), fixable=False)

    # The service: enabled, running, restarted when the list changes.
    # ``installed``: systemd has the unit now (check mode on a node whose driver this run installs: not yet).
    service = {'name': SERVICE, 'enabled': None, 'state': None, 'reset_failed': False, 'installed': installed}
    if predicting or unit.get('enabled') != 'enabled':
        service['enabled'] = True
        _plan.add_drift(out, CHECK, '{0} is {1}, not enabled at boot'.format(
            SERVICE, 'not installed yet' if predicting else unit.get('enabled') or 'not enabled'))
    active = not predicting and unit.get('active') == 'active'
    if change and (active or predicting) and _s(settings, 'restart'):
        service['state'] = 'restarted'
    elif change and active:
        _plan.add_drift(out, CHECK, 'nvidia-imex still runs with its old node list: restart it (nodeprep_imex_restart '
                        'is false)', fixable=False, level='warn')
    elif not active:
        service['state'] = 'started'
        now = 'not installed yet' if predicting else unit.get('active') or 'not running'
        _plan.add_drift(out, CHECK, '{0} is {1}'.format(SERVICE, now))
    # A unit that hit systemd's start limit (its daemon failed in a loop) refuses a start until it is reset.
    service['reset_failed'] = bool(service['state']) and unit.get('active') == 'failed'
    out['args']['service'] = service

    # The channel.
    channel_changes = _channel_files(out, facts, context, channels_mode)
    channel_words = ''
    if channels_mode == 'static':
        problems = [] if predicting else _imex.channel_drift(imex.get('channels'))
        if predicting:
            # The driver with nvidia-imex is installed in this run: the unit makes the channel once it is loaded.
            out['args']['channels_now'] = True
            out['reasons'].append('{0} is made by {1} once the driver installed in this run is loaded'.format(
                _imex.channel_path(0), CHANNEL_UNIT))
        elif problems:
            out['args']['channels_now'] = True
            for problem in problems:
                _plan.add_drift(out, CHECK, problem)
        channel_words = 'channel0 present' if not problems and not predicting else ''
    elif channel_changes:
        channel_words = 'the static channel unit is removed (Slurm makes the channels)'

    # The GPUs' NVLink clique against the group's.
    for problem in _imex.clique_drift(peers, context.get('host'), _gpus(facts)):
        _plan.add_drift(out, CHECK, problem, fixable=False)

    # The domain, as nvidia-imex-ctl -N -j shows it: only when this run changes nothing the daemon reads (a restart
    # or a first start is judged by the next read: the role plans again after its work, readiness later).
    ctl = imex.get('ctl') or {}
    observed = []
    if change or service['state'] or predicting:
        observed.append('domain read after nvidia-imex {0}'.format('restarts' if service['state'] == 'restarted'
                                                                   else 'starts'))
    elif ctl.get('domain') is not None:
        observed.append(_imex.domain_summary(ctl['domain']))
        for problem in _imex.domain_drift(ctl['domain'], peers, own['address']):
            _plan.add_drift(out, CHECK, problem, fixable=False)
    else:
        why = ctl.get('error') or 'nvidia-imex-ctl -N -j gave no domain'
        if ctl.get('not_configured'):
            why += ' (nvidia-imex-ctl cannot read the node list)'
        observed.append('domain not read')
        _plan.add_drift(out, CHECK, why, fixable=False)
    if channel_words:
        observed.append(channel_words)
    _plan.set_check(out, CHECK, expected, '; '.join(observed))
    out['args']['nodes'] = {'path': nodes_path, 'addresses': addresses}
    return out


def unit_text(python):
    return '\n'.join([
        _plan.managed_line(ROLE),
        '# IMEX channels do not survive a reboot (NVIDIA IMEX guide, "IMEX Channels"): this makes',
        '# {0} again at every boot, with the major the driver registered in /proc/devices.'.format(
            ', '.join(_imex.channel_path(minor) for minor in _imex.CHANNEL_MINORS)),
        '[Unit]',
        'Description=Create the NVIDIA IMEX channel device nodes (gpufleet.nodeprep)',
        'After=systemd-modules-load.service nvidia-persistenced.service',
        '',
        '[Service]',
        'Type=oneshot',
        'RemainAfterExit=yes',
        'ExecStart={0} {1} {2}'.format(python, SCRIPT, ' '.join(str(m) for m in _imex.CHANNEL_MINORS)),
        '',
        '[Install]',
        'WantedBy=multi-user.target',
        ''])


def _channel_files(out, facts, context, mode):
    """The boot unit, its script and link (static), or their removal (slurm); the changes made."""
    changes = []
    if mode == 'static':
        script = (context.get('role_files') or {}).get('script')
        if script is None:
            out['errors'].append('the channel script (roles/imex/files/nodeprep-imex-channels) was not handed to the '
                                 'plan')
            script = ''
        entries = [
            _plan.want_path(out, facts, SCRIPT, content=script, mode='0644'),
            _plan.want_path(out, facts, UNIT_PATH, content=unit_text(platform_python(facts)), mode='0644'),
            _plan.want_path(out, facts, UNIT_LINK, state='link', src=UNIT_PATH),
        ]
    else:
        entries = [_plan.want_path(out, facts, path, state='absent') for path in (UNIT_LINK, UNIT_PATH, SCRIPT)]
    for entry in entries:
        if entry['change']:
            changes.append(entry['change'])
            out['reasons'].remove(entry['change'])
            why = ' (the channel is not made again at the next boot)' if mode == 'static' else \
                ' (Slurm makes the channels)'
            _plan.add_drift(out, CHECK, entry['change'] + why)
    if changes:
        out['args']['daemon_reload'] = True
    # Check mode cannot run a unit it has not written (the role's twin task says what a run would do).
    out['args']['unit_written'] = any(e['change'] for e in entries if e['path'] == UNIT_PATH)
    return changes
