# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``limits`` namespace of gpu_node_facts and limits_facts: the effective pam_limits values of the users asked
for, and systemd's default and per-service limits.

Reads limits.conf, limits.d, the accounts, system.conf and ``systemctl show`` (through the collection's runner,
collect/_runner.run_status); the formats and pam_limits' resolution are parsers/_limits_conf.py.  No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import to_display
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._limits_conf import (
    LimitsError,
    SYSTEMD_ITEMS,
    debian_baseline,
    evaluate_user,
    limits_files,
    parse_limits_conf,
    parse_proc_limits,
    parse_systemctl_show,
    systemd_conf_files,
    systemd_defaults_from_files,
)


# ---------------------------------------------------------------- collector

def name_warning(path):
    """A warning for a file name that is not UTF-8, or None."""
    if to_display(path) == path:
        return None
    return '{0}: the file name is not UTF-8 (shown with \\x escapes); pam_limits reads it'.format(to_display(path))


def read_error(path, exc=None):
    """Why path cannot be read, naming it: '<path>: cannot read: <reason>'."""
    if os.path.islink(path) and not os.path.exists(path):
        reason = 'dangling symlink to {0}'.format(to_display(os.readlink(path)))
    elif os.path.isdir(path):
        reason = 'is a directory'
    elif exc is not None:
        reason = getattr(exc, 'strerror', None) or str(exc)
    else:
        reason = 'not a regular file'
    return '{0}: cannot read: {1}'.format(to_display(path), reason)


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'replace')


def read_text(path):
    """(text, None) or (None, error naming path) for a file that exists as a name but cannot be read."""
    if os.path.isdir(path) or (os.path.islink(path) and not os.path.exists(path)):
        return None, read_error(path)
    try:
        return _read(path), None
    except (IOError, OSError) as exc:
        return None, read_error(path, exc)


def _show(value):
    return repr(value) if isinstance(value, str) else str(value)


def _id_value(value, where, kind):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    raise LimitsError('{0}: {1} is not a {2} (allowed: an integer 0 or above)'.format(where, _show(value), kind))


def _group_names(value, where, allowed):
    if value is None:
        return []
    if isinstance(value, str):
        return [n.strip() for n in value.split(',') if n.strip()]
    if isinstance(value, (list, tuple)):
        names = []
        for name in value:
            if isinstance(name, bool) or not isinstance(name, (str, int)):
                raise LimitsError('{0}: {1} is not a group name (allowed: {2})'.format(where, _show(name), allowed))
            names.append(str(name).strip())
        return names
    raise LimitsError('{0}: {1} is not a list of group names (allowed: {2})'.format(where, _show(value), allowed))


GROUP_SPEC_KEYS = ('groups', 'uid', 'gid')


def check_groups_option(groups):
    """Validate the ``groups`` option: {user: list|str|{groups, uid, gid}} -> {user: {groups, uid, gid}}.

    A string is one group name or a comma-separated list of them (never a list of letters). Raises LimitsError
    naming the user, the key, the value and what is allowed.
    """
    if groups is None:
        return None
    checked = {}
    for user, spec in groups.items():
        where = 'groups.{0}'.format(user)
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(GROUP_SPEC_KEYS))
            if unknown:
                raise LimitsError('{0}: unknown key {1} (allowed: {2})'.format(
                    where, ', '.join(repr(k) for k in unknown), ', '.join(GROUP_SPEC_KEYS)))
            checked[user] = {
                'groups': _group_names(spec.get('groups'), where + '.groups',
                                       'a list of group names or a comma-separated string of them'),
                'uid': _id_value(spec.get('uid'), where + '.uid', 'uid'),
                'gid': _id_value(spec.get('gid'), where + '.gid', 'gid'),
            }
        else:
            allowed = ('a list of group names, a comma-separated string of them, or a dict with the keys groups, '
                       'uid and gid')
            checked[user] = {'groups': _group_names(spec, where, allowed), 'uid': None, 'gid': None}
    return checked


def _user_info(name, groups_override, root):
    """{'name','uid','gid','groups','gids'} from pwd/grp (root '/' only) or groups_override."""
    import grp
    import pwd
    info = {'name': name, 'uid': None, 'gid': None, 'groups': set(), 'gids': set()}
    known = False
    if root in ('/', ''):
        try:
            pw = pwd.getpwnam(name)
            info['uid'], info['gid'] = pw.pw_uid, pw.pw_gid
            known = True
        except KeyError:
            pass
        group_db = [(g.gr_name, g.gr_gid, list(g.gr_mem)) for g in grp.getgrall()]
    else:
        passwd_db, group_db = _tree_accounts(root)
        if name in passwd_db:
            info['uid'], info['gid'] = passwd_db[name]
            known = True
    gid_by_name = dict((g[0], g[1]) for g in group_db)
    if groups_override is not None and name in groups_override:
        spec = groups_override[name]  # checked by check_groups_option()
        if spec['uid'] is not None:
            info['uid'] = spec['uid']
        if spec['gid'] is not None:
            info['gid'] = spec['gid']
        info['groups'] = set(spec['groups'])
        for group_name in info['groups']:
            if group_name in gid_by_name:
                info['gids'].add(gid_by_name[group_name])
        if info['gid'] is not None:
            info['gids'].add(info['gid'])
        return info
    if not known:
        raise LimitsError(
            "user '{0}' given in users does not exist on this host (pwd lookup failed); "
            "pass its groups in 'groups' to evaluate it anyway".format(name))
    for group_name, gid, members in group_db:
        if gid == info['gid'] or name in members:
            info['groups'].add(group_name)
            info['gids'].add(gid)
    info['gids'].add(info['gid'])
    return info


def _tree_accounts(root):
    """Read <root>/etc/passwd and <root>/etc/group: ({name: (uid, gid)}, [(group, gid, members)])."""
    passwd_db = {}
    group_db = []
    for rel, target in (('etc/passwd', 'passwd'), ('etc/group', 'group')):
        try:
            text = _read(os.path.join(root, rel))
        except (IOError, OSError):
            continue
        for line in text.splitlines():
            fields = line.split(':')
            if len(fields) < 4 or not fields[2].isdigit():
                continue
            if target == 'passwd' and fields[3].isdigit():
                passwd_db[fields[0]] = (int(fields[2]), int(fields[3]))
            elif target == 'group':
                members = [m for m in fields[3].split(',') if m]
                group_db.append((fields[0], int(fields[2]), members))
    return passwd_db, group_db


def detect_flavour(root='/'):
    """'debian' when the Debian pam_limits patch applies (Debian, Ubuntu), else 'upstream'."""
    return 'debian' if os.path.exists(os.path.join(root, 'etc/debian_version')) else 'upstream'


def systemd_booted():
    """sd_booted(): the host runs systemd as PID 1."""
    return os.path.isdir('/run/systemd/system')


def collect_systemd(module, services=(), root='/'):
    files = systemd_conf_files(root)
    texts = []
    errors = []
    for path in files:
        if os.path.islink(path) and os.readlink(path) == '/dev/null':
            texts.append((to_display(path), ''))
            continue
        text, error = read_text(path)
        if error:
            errors.append(error)
        else:
            texts.append((to_display(path), text))
    try:
        configured = systemd_defaults_from_files(texts)
    except LimitsError as exc:
        errors.append(str(exc))
        configured = {}
    out = {'default': {}, 'default_source': {}, 'configured': {}, 'config_files': [to_display(p) for p in files],
           'manager': None, 'services': {}, 'service_errors': {}, 'reason': None, 'errors': errors}
    for item, data in configured.items():
        out['configured'][item] = {'soft': data['soft'], 'hard': data['hard']}
    systemctl = None
    if root not in ('/', ''):
        out['reason'] = 'root is {0}: systemd is not asked about a tree'.format(root)
    elif not systemd_booted():
        out['reason'] = 'this host was not booted with systemd (/run/systemd/system is missing)'
    else:
        systemctl = module.get_bin_path('systemctl')
        if systemctl is None:
            out['reason'] = 'systemctl not found in PATH'
    if systemctl:
        argv = [systemctl, 'show']
        for name in SYSTEMD_ITEMS.values():
            argv += ['-p', 'DefaultLimit' + name, '-p', 'DefaultLimit' + name + 'Soft']
        rc, stdout, stderr = run_status(module, argv)
        if rc == 0:
            out['manager'] = parse_systemctl_show(stdout, prefix='Default')
        else:
            out['reason'] = 'systemctl show failed (rc={0}): {1}'.format(rc, stderr.strip())
    for item in SYSTEMD_ITEMS:
        if item in configured:
            out['default'][item] = {'soft': configured[item]['soft'], 'hard': configured[item]['hard']}
            out['default_source'][item] = configured[item]['source']
        elif out['manager'] and item in out['manager']:
            out['default'][item] = out['manager'][item]
            out['default_source'][item] = 'manager'
        else:
            out['default'][item] = None
            out['default_source'][item] = None
    for service in services:
        if not systemctl or out['manager'] is None:
            out['services'][service] = None
            out['service_errors'][service] = out['reason']
            continue
        argv = [systemctl, 'show', '-p', 'LoadState']
        for name in SYSTEMD_ITEMS.values():
            argv += ['-p', 'Limit' + name, '-p', 'Limit' + name + 'Soft']
        argv += ['--', service]
        rc, stdout, stderr = run_status(module, argv)
        if rc != 0:
            out['services'][service] = None
            out['service_errors'][service] = 'systemctl show failed (rc={0}): {1}'.format(rc, stderr.strip())
            continue
        parsed = parse_systemctl_show(stdout)
        state = parsed.pop('LoadState', None)
        if state == 'not-found':
            out['services'][service] = None
            out['service_errors'][service] = "service '{0}' not found (LoadState=not-found)".format(service)
            continue
        out['services'][service] = parsed
    return out


def collect_limits_facts(module, users=(), services=(), root='/', groups=None, flavour='auto'):
    """Return the ``limits`` namespace; raises LimitsError for bad options and unknown users.

    Files that exist but cannot be read (a directory, a dangling symlink, no permission) do not raise: each is an
    entry of ``errors`` naming the path, because the limits a login gets cannot be known then.
    """
    root = root or '/'
    groups = check_groups_option(groups)
    if flavour == 'auto':
        flavour = detect_flavour(root)
    entries = []
    warnings = []
    errors = []
    files = [p for p in limits_files(root) if os.path.lexists(p)]
    for path in files:
        warning = name_warning(path)
        if warning:
            warnings.append(warning)
        text, error = read_text(path)
        if error:
            errors.append(error)
            continue
        found, bad = parse_limits_conf(text, to_display(path))
        entries.extend(found)
        warnings.extend(bad)
    nr_open = None
    try:
        nr_open = int(_read(os.path.join(root, 'proc/sys/fs/nr_open')).strip())
    except (IOError, OSError, ValueError):
        pass
    baseline = None
    if flavour == 'debian':
        proc1 = {}
        try:
            proc1 = parse_proc_limits(_read(os.path.join(root, 'proc/1/limits')))
        except (IOError, OSError):
            pass
        baseline = debian_baseline(proc1)
    effective = {}
    sources = {}
    no_limits = {}
    for name in users:
        info = _user_info(name, groups, root)
        result = evaluate_user(entries, info, root_exempt=(flavour == 'debian'), baseline=baseline,
                               nr_open=nr_open)
        effective[name] = result['items']
        sources[name] = result['sources']
        if result['no_limits']:
            no_limits[name] = result['no_limits']
    public_entries = []
    for entry in entries:
        public_entries.append(dict((k, entry.get(k)) for k in ('file', 'line', 'domain', 'type', 'item', 'value')))
    systemd = collect_systemd(module, services, root)
    return {
        'entries': public_entries,
        'files': [to_display(p) for p in files],
        'warnings': warnings,
        'errors': errors + systemd['errors'],
        'flavour': flavour,
        'effective': effective,
        'sources': sources,
        'no_limits': no_limits,
        'systemd': systemd,
    }
