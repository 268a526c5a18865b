# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``limits`` subset as the node reads it: the text of the files pam_limits and systemd read, ``systemctl show``
of the manager and the services asked, the accounts of the users asked, and slurmd's limits and ``scontrol show
config``'s propagation lines where slurmd runs.  It judges nothing: parsers/_limits_conf.resolve turns this into the
``limits`` namespace (on the controller for gpu_node_facts, on the node for limits_facts).  No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import CommandError, run, run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._facts_output import to_display

LIMITS_CONF = 'etc/security/limits.conf'
LIMITS_D = 'etc/security/limits.d'
SYSTEMD_CONF_DIRS = ('etc/systemd', 'run/systemd', 'usr/local/lib/systemd', 'usr/lib/systemd')
SYSTEMD_NAMES = ('MEMLOCK', 'NOFILE')
# In the users: any non-root user that no user, @group or uid-range line names (only the * lines reach it).
ANY_USER = '*'
SCONTROL_TIMEOUT = 20


def _c_order(names):
    return sorted(names, key=lambda n: n.encode('utf-8', 'surrogateescape'))


def limits_files(root='/'):
    """limits.conf then limits.d/*.conf in C-locale (byte) order, as pam_limits reads them."""
    names = [os.path.basename(p) for p in glob.glob(os.path.join(root, LIMITS_D, '*.conf'))]
    return [os.path.join(root, LIMITS_CONF)] + [os.path.join(root, LIMITS_D, n) for n in _c_order(names)]


def systemd_conf_files(root='/'):
    """system.conf then system.conf.d/*.conf with systemd's precedence (etc > run > usr/local/lib > usr/lib)."""
    files = [os.path.join(root, b, 'system.conf') for b in SYSTEMD_CONF_DIRS
             if os.path.isfile(os.path.join(root, b, 'system.conf'))][:1]
    dropins = {}
    for base in SYSTEMD_CONF_DIRS:
        for path in glob.glob(os.path.join(root, base, 'system.conf.d', '*.conf')):
            dropins.setdefault(os.path.basename(path), path)
    return files + [dropins[n] for n in _c_order(dropins)]


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'replace')


def read_file(path):
    """{'path', 'text', 'error', 'not_utf8'}: the text, or why a name that exists cannot be read (naming the path);
    ``not_utf8``: the name is shown with \\x escapes."""
    record = {'path': to_display(path), 'text': None, 'error': None}
    record['not_utf8'] = record['path'] != path
    if os.path.islink(path) and not os.path.exists(path):
        reason = 'dangling symlink to {0}'.format(to_display(os.readlink(path)))
    elif os.path.isdir(path):
        reason = 'is a directory'
    else:
        try:
            return dict(record, text=_read(path))
        except (IOError, OSError) as exc:
            reason = getattr(exc, 'strerror', None) or str(exc)
    return dict(record, error='{0}: cannot read: {1}'.format(record['path'], reason))


def _optional(path):
    try:
        return _read(path)
    except (IOError, OSError):
        return None


def passwd_entry(name):
    """(uid, gid) of a user from pwd (NSS: LDAP and SSSD accounts too), or None."""
    import pwd
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def group_db():
    """[(group, gid, members)] from grp."""
    import grp
    return [(g.gr_name, g.gr_gid, list(g.gr_mem)) for g in grp.getgrall()]


def account(name, known, groups):
    """{'uid', 'gid', 'groups', 'gids'} of the user ``name`` known as ``known`` ((uid, gid), None for an unknown user:
    then None) in the groups ``groups`` ([(group, gid, members)]): its primary group and every group naming it.
    ANY_USER is an account no line names: no uid, no group."""
    if name == ANY_USER:
        return {'uid': None, 'gid': None, 'groups': [], 'gids': []}
    if known is None:
        return None
    matching = [g for g in groups if g[1] == known[1] or name in g[2]]
    return {'uid': known[0], 'gid': known[1], 'groups': sorted(set(g[0] for g in matching)),
            'gids': sorted(set(g[1] for g in matching) | set([known[1]]))}


def read_account(name):
    """The account of a user of this system (pwd/grp); limits_facts' tree and groups options: collect/_limits_tree."""
    return account(name, passwd_entry(name), group_db() if name != ANY_USER else [])


def systemd_booted():
    """sd_booted(): the host runs systemd as PID 1."""
    return os.path.isdir('/run/systemd/system')


def _show_argv(systemctl, prefix, service=None):
    argv = [systemctl, 'show'] + (['-p', 'LoadState'] if service else [])
    for name in SYSTEMD_NAMES:
        argv += ['-p', prefix + 'Limit' + name, '-p', prefix + 'Limit' + name + 'Soft']
    return argv + (['--', service] if service else [])


def read_systemd(module, services=(), root='/'):
    """The manager's configuration files (their text; a link to /dev/null is empty), and ``systemctl show`` of the
    manager and of each service (stdout), or the reason systemd was not asked."""
    files = []
    for path in systemd_conf_files(root):
        if os.path.islink(path) and os.readlink(path) == '/dev/null':
            files.append(dict(read_file('/dev/null'), path=to_display(path)))
        else:
            files.append(read_file(path))
    out = {'files': files, 'manager': None, 'services': {}, 'reason': None}
    systemctl = None
    if root not in ('/', ''):
        out['reason'] = 'root is {0}: systemd is not asked about a tree'.format(root)
    elif not systemd_booted():
        out['reason'] = 'this host was not booted with systemd (/run/systemd/system is missing)'
    else:
        systemctl = module.get_bin_path('systemctl')
        out['reason'] = None if systemctl else 'systemctl not found in PATH'
    if systemctl:
        rc, stdout, stderr = run_status(module, _show_argv(systemctl, 'Default'))
        out['manager'] = stdout if rc == 0 else None
        out['reason'] = None if rc == 0 else 'systemctl show failed (rc={0}): {1}'.format(rc, stderr.strip())
    for service in services:
        if out['manager'] is None:
            out['services'][service] = {'show': None, 'error': out['reason']}
            continue
        rc, stdout, stderr = run_status(module, _show_argv(systemctl, '', service))
        out['services'][service] = {'show': stdout if rc == 0 else None, 'error': None if rc == 0 else
                                    'systemctl show failed (rc={0}): {1}'.format(rc, stderr.strip())}
    return out


def _ours(proc, pid):
    """The process is in this system's PID namespace (not a container's), or that cannot be told."""
    try:
        return os.readlink(os.path.join(proc, pid, 'ns/pid')) == os.readlink(os.path.join(proc, 'self/ns/pid'))
    except OSError:
        return True


def read_slurm(module, proc='/proc'):
    """None where no slurmd of this system runs; else each slurmd's /proc/<pid>/limits text and the Propagate* lines
    of ``scontrol show config`` (or why they could not be read)."""
    pids = sorted(int(p) for p in os.listdir(proc) if p.isdigit()
                  and (_optional(os.path.join(proc, p, 'comm')) or '').strip() == 'slurmd' and _ours(proc, p))
    if not pids:
        return None
    out = {'slurmd': [{'pid': pid, 'limits': _optional(os.path.join(proc, str(pid), 'limits'))} for pid in pids],
           'config': None, 'config_error': None}
    scontrol = module.get_bin_path('scontrol')
    try:  # Slurm installed outside PATH (/opt/slurm/sbin/slurmd): the scontrol beside it
        beside = os.path.join(os.path.dirname(os.path.dirname(os.readlink(os.path.join(proc, str(pids[0]), 'exe')))),
                              'bin', 'scontrol')
    except OSError:
        beside = None
    scontrol = scontrol or (beside if beside and os.access(beside, os.X_OK) else None)
    if not scontrol:
        out['config_error'] = 'scontrol not found in PATH nor beside slurmd'
        return out
    try:
        result = run(module, [scontrol, 'show', 'config'], timeout=SCONTROL_TIMEOUT)
    except CommandError as exc:
        out['config_error'] = str(exc)
        return out
    if result.rc == 0 and not result.timed_out:
        out['config'] = [line for line in result.stdout.splitlines() if line.startswith('Propagate')]
    else:
        out['config_error'] = 'scontrol show config {0}: {1}'.format(
            'did not answer within {0} seconds'.format(SCONTROL_TIMEOUT) if result.timed_out else
            'failed (rc={0})'.format(result.rc), result.stderr.strip())
    return out


def read_limits(module, users=(), services=(), root='/', read_user=read_account):
    """What the node holds for the ``limits`` namespace (see the module docstring); never judges or raises on a
    file it cannot read.  ``read_user``: name -> account (this system's; a tree's: collect/_limits_tree.py)."""
    root = root or '/'
    files = [p for p in limits_files(root) if os.path.lexists(p)]
    return {
        'debian': os.path.exists(os.path.join(root, 'etc/debian_version')),
        'files': [read_file(path) for path in files],
        'proc1_limits': _optional(os.path.join(root, 'proc/1/limits')),
        'nr_open': _optional(os.path.join(root, 'proc/sys/fs/nr_open')),
        'accounts': dict((name, read_user(name)) for name in users),
        'systemd': read_systemd(module, services, root),
        'slurm': read_slurm(module) if root == '/' else None,
    }
