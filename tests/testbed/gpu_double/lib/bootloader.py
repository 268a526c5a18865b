# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Boot loader and initramfs shims of the simulated fleet: grubby (EL, BLS entries + grubenv),
update-grub / grub-editenv / grub-set-default / grub-reboot (Debian family), dracut and
update-initramfs (write a text manifest that records the modprobe.d files, see gpudouble)."""
from __future__ import absolute_import, division, print_function

import os
import re
import sys

import gpudouble as gd

ENTRIES = 'boot/loader/entries'


def machine_id():
    return (gd.read_text('etc/machine-id', '') or '').strip() or 'testbed0000000000000000000000000'


def _vkey(release):
    return [int(x) if x.isdigit() else x for x in re.split(r'[.\-_+]', release)]


# ------------------------------------------------------------ GRUB environment block

def grubenv_rel():
    return 'boot/grub2/grubenv' if os.path.isdir(gd.path('boot/grub2')) or os.path.isdir(gd.path(ENTRIES)) \
        else 'boot/grub/grubenv'


def read_env(rel=None):
    text = gd.read_text(rel or grubenv_rel(), '') or ''
    return dict(l.split('=', 1) for l in text.splitlines() if '=' in l and not l.startswith('#'))


def write_env(vals, rel=None):
    body = '# GRUB Environment Block\n' + ''.join('{0}={1}\n'.format(k, v) for k, v in sorted(vals.items()))
    body += '#' * max(0, 1024 - len(body))
    gd.write_text(rel or grubenv_rel(), body)


# ------------------------------------------------------------ grubby (BLS)

def bls_entries():
    """List of dicts sorted like grubby (newest version first)."""
    d = gd.path(ENTRIES)
    out = []
    if os.path.isdir(d):
        for name in os.listdir(d):
            if not name.endswith('.conf'):
                continue
            vals = {'id': name[:-5]}
            for line in (gd.read_text(os.path.join(ENTRIES, name), '') or '').splitlines():
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    vals[parts[0]] = parts[1]
            out.append(vals)
    out.sort(key=lambda e: _vkey(e.get('version', '')), reverse=True)
    return out


def default_entry(entries):
    env = read_env()
    saved = env.get('saved_entry')
    for idx, e in enumerate(entries):
        if e['id'] == saved:
            return idx, e
    return (0, entries[0]) if entries else (None, None)


def write_bls(release, kernel_path, initrd, title, args):
    content = ('title {0}\nversion {1}\nlinux {2}\ninitrd {3}\noptions {4}\n'
               'grub_users $grub_users\ngrub_arg --unrestricted\ngrub_class kernel\n').format(
        title, release, kernel_path, initrd, args)
    eid = '{0}-{1}'.format(machine_id(), release)
    gd.write_text(os.path.join(ENTRIES, eid + '.conf'), content)
    return eid


def _find(entries, spec):
    if spec in ('DEFAULT',):
        return [default_entry(entries)]
    if spec == 'ALL':
        return list(enumerate(entries))
    if re.match(r'^\d+$', spec):
        i = int(spec)
        return [(i, entries[i])] if i < len(entries) else []
    return [(i, e) for i, e in enumerate(entries) if e.get('linux') == spec]


def grubby(argv):
    opts = {}
    for arg in argv:
        if arg.startswith('--'):
            k, sep, v = arg[2:].partition('=')
            opts[k] = v if sep else True
    entries = bls_entries()
    if 'default-kernel' in opts:
        idx, e = default_entry(entries)
        if e is None:
            return 1
        print(e['linux'])
        return 0
    if 'default-index' in opts:
        idx, e = default_entry(entries)
        print(idx if idx is not None else -1)
        return 0
    if 'default-title' in opts:
        idx, e = default_entry(entries)
        print(e['title'] if e else '')
        return 0
    if 'info' in opts:
        found = _find(entries, opts['info'])
        if not found or found == [(None, None)]:
            sys.stderr.write('The param {0} is incorrect\n'.format(opts['info']))
            return 1
        for idx, e in found:
            print('index={0}\nkernel="{1}"\nargs="{2}"\nroot="{3}"\ninitrd="{4}"\ntitle="{5}"\nid="{6}"'.format(
                idx, e.get('linux'), e.get('options', ''), 'UUID=testbed-root', e.get('initrd', ''),
                e.get('title', ''), e['id']))
        return 0
    if 'set-default' in opts or 'set-default-index' in opts:
        if 'set-default' in opts:
            found = [(i, e) for i, e in enumerate(entries) if e.get('linux') == opts['set-default']]
        else:
            found = _find(entries, opts['set-default-index'])
        if not found:
            sys.stderr.write('The param {0} is incorrect\n'.format(opts.get('set-default') or
                                                                   opts.get('set-default-index')))
            return 1
        idx, e = found[0]
        env = read_env()
        env['saved_entry'] = e['id']
        write_env(env)
        print('The default is /{0}/{1}.conf with index {2} and kernel {3}'.format(ENTRIES, e['id'], idx, e['linux']))
        return 0
    if 'add-kernel' in opts:
        kpath = opts['add-kernel']
        release = kpath.split('vmlinuz-', 1)[-1]
        args = (default_entry(entries)[1] or {}).get('options', 'root=UUID=testbed-root ro') \
            if 'copy-default' in opts else opts.get('args', 'root=UUID=testbed-root ro')
        eid = write_bls(release, kpath, opts.get('initrd', '/boot/initramfs-{0}.img'.format(release)),
                        opts.get('title', 'Testbed Linux ({0})'.format(release)), args)
        if 'make-default' in opts:
            env = read_env()
            env['saved_entry'] = eid
            write_env(env)
        return 0
    if 'remove-kernel' in opts:
        for idx, e in _find(bls_entries(), opts['remove-kernel']):
            os.remove(gd.path(os.path.join(ENTRIES, e['id'] + '.conf')))
        return 0
    if 'update-kernel' in opts:
        found = _find(entries, opts['update-kernel'])
        if not found:
            sys.stderr.write('The param {0} is incorrect\n'.format(opts['update-kernel']))
            return 1
        for idx, e in found:
            words = e.get('options', '').split()
            for rm in str(opts.get('remove-args', '') or '').split():
                words = [w for w in words if w != rm and w.split('=', 1)[0] != rm.split('=', 1)[0]]
            for add in str(opts.get('args', '') or '').split():
                words = [w for w in words if w.split('=', 1)[0] != add.split('=', 1)[0]] + [add]
            e['options'] = ' '.join(words)
            write_bls(e['version'], e['linux'], e.get('initrd', ''), e.get('title', ''), e['options'])
        return 0
    sys.stderr.write('grubby: no action given (testbed shim supports --default-kernel, --default-index, '
                     '--default-title, --info, --set-default, --set-default-index, --add-kernel, '
                     '--remove-kernel, --update-kernel)\n')
    return 1


# ------------------------------------------------------------ Debian family GRUB

def debian_kernels():
    boot = gd.path('boot')
    rels = [n[len('vmlinuz-'):] for n in os.listdir(boot) if n.startswith('vmlinuz-')] if os.path.isdir(boot) else []
    return sorted(rels, key=_vkey, reverse=True)


def update_grub(argv):
    defaults = dict(l.split('=', 1) for l in (gd.read_text('etc/default/grub', '') or '').splitlines()
                    if '=' in l and not l.lstrip().startswith('#'))
    gdef = defaults.get('GRUB_DEFAULT', '0').strip('"\'')
    cmdline = defaults.get('GRUB_CMDLINE_LINUX_DEFAULT', 'quiet').strip('"\'') + ' ' + \
        defaults.get('GRUB_CMDLINE_LINUX', '').strip('"\'')
    kernels = debian_kernels()
    sys.stderr.write('Generating grub configuration file ...\n')
    lines = ['# testbed update-grub: generated grub.cfg', 'set default="{0}"'.format(
        '${saved_entry}' if gdef == 'saved' else gdef)]
    if gdef == 'saved':
        lines.insert(1, 'if [ -s $prefix/grubenv ]; then\n  load_env\nfi')
    for i, k in enumerate(kernels):
        sys.stderr.write('Found linux image: /boot/vmlinuz-{0}\n'.format(k))
        entry = ("menuentry 'Debian GNU/Linux, with Linux {0}' --class debian $menuentry_id_option "
                 "'gnulinux-{0}-advanced-testbed' {{\n\tlinux\t/boot/vmlinuz-{0} root=UUID=testbed-root ro {1}\n"
                 "\tinitrd\t/boot/initrd.img-{0}\n}}").format(k, cmdline.strip())
        lines.append(entry)
    gd.write_text('boot/grub/grub.cfg', '\n'.join(lines) + '\n')
    sys.stderr.write('done\n')
    return 0


def grub_editenv(argv):
    if len(argv) < 2:
        sys.stderr.write('Usage: grub-editenv FILE COMMAND\n')
        return 1
    rel = argv[0].lstrip('/') if argv[0] != '-' else grubenv_rel()
    root = gd.root().rstrip('/')
    if root and argv[0].startswith(root):
        rel = argv[0][len(root):].lstrip('/')
    env = read_env(rel)
    cmd = argv[1]
    if cmd == 'list':
        for k, v in sorted(env.items()):
            print('{0}={1}'.format(k, v))
        return 0
    if cmd in ('set', 'create'):
        for kv in argv[2:]:
            k, dummy, v = kv.partition('=')
            env[k] = v
        write_env(env, rel)
        return 0
    if cmd == 'unset':
        for k in argv[2:]:
            env.pop(k, None)
        write_env(env, rel)
        return 0
    sys.stderr.write('grub-editenv: error: unknown command `{0}\'.\n'.format(cmd))
    return 1


def grub_set_default(argv, key='saved_entry'):
    if not argv:
        sys.stderr.write('grub-set-default: error: menu entry not specified.\n')
        return 1
    env = read_env('boot/grub/grubenv')
    env[key] = argv[-1]
    write_env(env, 'boot/grub/grubenv')
    return 0


# ------------------------------------------------------------ initramfs

def _manifest(kernel):
    lines = ['# testbed initramfs for {0} (text manifest, not a real image)'.format(kernel)]
    for d in gd.MODPROBE_DIRS:
        full = gd.path(d)
        if os.path.isdir(full):
            for name in sorted(os.listdir(full)):
                if name.endswith('.conf'):
                    lines.append('## /{0}/{1}'.format(d, name))
                    lines.extend((gd.read_text(os.path.join(d, name), '') or '').splitlines())
    return '\n'.join(lines) + '\n'


def dracut(argv):
    force = '-f' in argv or '--force' in argv
    pos = [a for a in argv if not a.startswith('-')]
    kernel = gd.uname_r()
    if '--kver' in argv:
        kernel = argv[argv.index('--kver') + 1]
        pos = [p for p in pos if p != kernel]
    image = pos[0] if pos else '/boot/initramfs-{0}.img'.format(kernel)
    if len(pos) > 1:
        kernel = pos[1]
    if '--regenerate-all' in argv:
        targets = [(k, '/boot/initramfs-{0}.img'.format(k)) for k in os.listdir(gd.path('lib/modules'))]
    else:
        targets = [(kernel, image)]
    for k, img in targets:
        rel = img.lstrip('/')
        if os.path.exists(gd.path(rel)) and not force:
            sys.stderr.write('dracut: Will not override existing initramfs ({0}) without --force\n'.format(img))
            return 1
        if not os.path.isdir(gd.path(os.path.join('lib/modules', k))):
            sys.stderr.write('dracut: Cannot find module directory /lib/modules/{0}/\n'.format(k))
            return 1
        gd.write_text(rel, _manifest(k))
    return 0


def update_initramfs(argv):
    kernel = None
    if '-k' in argv:
        kernel = argv[argv.index('-k') + 1]
    if not ('-u' in argv or '-c' in argv):
        sys.stderr.write('Usage: update-initramfs {-c|-d|-u} [-k version] [-v] [-b directory]\n')
        return 2
    if kernel in (None, 'all') and '-u' in argv:
        kernels = debian_kernels() if kernel == 'all' else [gd.uname_r()]
    else:
        kernels = [kernel or gd.uname_r()]
    for k in kernels:
        if not os.path.isdir(gd.path(os.path.join('lib/modules', k))):
            sys.stderr.write('update-initramfs: /lib/modules/{0} does not exist. Cannot update.\n'.format(k))
            return 1
        sys.stderr.write('update-initramfs: Generating /boot/initrd.img-{0}\n'.format(k))
        gd.write_text(os.path.join('boot', 'initrd.img-{0}'.format(k)), _manifest(k))
    return 0


def kernel_install(argv):
    """testbed-kernel-install add|remove RELEASE: what EL's kernel-install / Debian's postinst.d do."""
    if len(argv) < 2:
        sys.stderr.write('usage: testbed-kernel-install add|remove RELEASE\n')
        return 2
    action, rel = argv[0], argv[1]
    el = os.path.exists(gd.path('usr/sbin/grubby')) or os.path.isdir(gd.path(ENTRIES))
    if action == 'add':
        if el:
            dracut(['-f', '/boot/initramfs-{0}.img'.format(rel), rel])
            upd = 'UPDATEDEFAULT=yes' in (gd.read_text('etc/sysconfig/kernel', '') or '')
            grubby(['--add-kernel=/boot/vmlinuz-{0}'.format(rel), '--initrd=/boot/initramfs-{0}.img'.format(rel),
                    '--title=Testbed Linux ({0})'.format(rel), '--copy-default'] + (['--make-default'] if upd else []))
        else:
            update_initramfs(['-c', '-k', rel])
            update_grub([])
    elif action == 'remove':
        if el:
            grubby(['--remove-kernel=/boot/vmlinuz-{0}'.format(rel)])
            img = gd.path('boot/initramfs-{0}.img'.format(rel))
        else:
            img = gd.path('boot/initrd.img-{0}'.format(rel))
        if os.path.exists(img):
            os.remove(img)
        if not el:
            update_grub([])
    return 0


TOOLS = {'grubby': grubby, 'update-grub': update_grub, 'grub-editenv': grub_editenv,
         'grub-set-default': grub_set_default,
         'grub-reboot': lambda a: grub_set_default(a, 'next_entry'),
         'dracut': dracut, 'update-initramfs': update_initramfs, 'testbed-kernel-install': kernel_install}


# ------------------------------------------------------------ /proc/cmdline of this boot
CMDLINE = os.path.join(gd.RUN_DIR, 'cmdline')


def boot_cmdline():
    """The kernel command line the boot loader gave this boot: the default BLS entry's options (EL), else the linux
    line of grub.cfg's default entry (Debian/Ubuntu, as update-grub wrote it); GRUB's BOOT_IMAGE= first."""
    entries = bls_entries()
    if entries:
        _idx, entry = default_entry(entries)
        return 'BOOT_IMAGE=(hd0,gpt2){0} {1}'.format(entry.get('linux', ''), entry.get('options', '')).strip()
    cfg = gd.read_text('boot/grub/grub.cfg') or ''
    for line in cfg.splitlines():
        words = line.split()
        if words and words[0] == 'linux' and len(words) > 1:
            return 'BOOT_IMAGE={0} {1}'.format(words[1], ' '.join(words[2:])).strip()
    return 'BOOT_IMAGE=/boot/vmlinuz-{0} root=UUID=testbed-root ro'.format(gd.uname_r())


def write_cmdline():
    """Write this boot's command line in place (the early-boot hook binds the file over /proc/cmdline)."""
    try:
        with open(gd.path(CMDLINE), 'w') as handle:
            handle.write(boot_cmdline() + '\n')
    except (IOError, OSError):
        pass
