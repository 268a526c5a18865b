#!/bin/sh
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# install_base.sh ROOT PROFILE_JSON
#
# Prepare a node root for the GPU double before its first boot (idempotent; run again after
# changing the profile).  Installs:
#   ROOT/etc/testbed/hardware.json            the hardware profile
#   ROOT/usr/lib/gpu-double/                  the double's library, templates and bin/gpu-double
#   ROOT/etc/systemd/system/gpu-double-driver.service (+ enabled in sysinit.target.wants)
#   ROOT/usr/local/sbin/modprobe              shim for nvidia*, nouveau and ib_umad; others go to kmod
#   ROOT/usr/local/sbin/modinfo               shim for nvidia_peermem; others go to kmod
#   ROOT/usr/local/sbin/systemd-detect-virt   bare metal ("none"), or a VM under fault virtual-machine
#   ROOT/etc/testbed/early-mounts.d/50-gpu-double-sysfs  writable /sys/class/infiniband and
#                                             /sys/firmware/efi/efivars at every boot (see early/)
#   ROOT/usr/bin/mokutil                      shim (--sb-state, --test-key) unless a real mokutil is there
#   the running kernel (uname -r) as an installed distro kernel: /lib/modules/<k>, /boot/vmlinuz-<k>,
#   an initramfs manifest without the nouveau blacklist, and a boot entry
#   EL-like roots (ROOT/etc/redhat-release or ID_LIKE/ID rhel|fedora|centos|rocky|alma in os-release):
#     /usr/sbin/grubby, /usr/bin/dracut, /usr/bin/kernel-install-testbed, BLS entry, grubenv,
#     /etc/sysconfig/kernel (UPDATEDEFAULT=yes)
#   Debian-like roots: /usr/sbin/update-grub, grub-editenv, grub-set-default, grub-reboot,
#     update-initramfs (only where the real ones are absent), /etc/default/grub, grub.cfg
#   /var/lib/testbed/faults/ (empty; the testbed binds the host fault folder over it)
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 ROOT PROFILE_JSON" >&2
    exit 2
fi
ROOT=$1
PROFILE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
KREL=${GPU_DOUBLE_UNAME_R:-$(uname -r)}

[ -d "$ROOT" ] || { echo "install_base.sh: root $ROOT is not a directory" >&2; exit 1; }
[ -f "$PROFILE" ] || { echo "install_base.sh: profile $PROFILE not found" >&2; exit 1; }
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["gpus"] and p["template"]' "$PROFILE" \
    || { echo "install_base.sh: profile $PROFILE is not a GPU double profile" >&2; exit 1; }

el=no
if [ -f "$ROOT/etc/redhat-release" ] || grep -Eqs '^(ID|ID_LIKE)=.*(rhel|fedora|centos|rocky|almalinux)' "$ROOT/etc/os-release"; then
    el=yes
fi

install -d "$ROOT/etc/testbed" "$ROOT/usr/lib/gpu-double/bin" "$ROOT/usr/lib/gpu-double/templates" \
    "$ROOT/var/lib/testbed/faults" "$ROOT/usr/local/sbin" "$ROOT/etc/systemd/system/sysinit.target.wants" \
    "$ROOT/lib/modules/$KREL/kernel" "$ROOT/boot" "$ROOT/etc/modprobe.d" "$ROOT/etc/testbed/early-mounts.d"
install -m 0644 "$PROFILE" "$ROOT/etc/testbed/hardware.json"
install -m 0644 "$HERE"/lib/*.py "$ROOT/usr/lib/gpu-double/"
install -m 0644 "$HERE"/templates/*.xml "$ROOT/usr/lib/gpu-double/templates/"
# The entry point is kept without its interpreter line in the repository; add it here.
{ printf '#!/usr/bin/python3 -sS\n'; cat "$HERE/bin/gpu-double"; } > "$ROOT/usr/lib/gpu-double/bin/gpu-double"
chmod 0755 "$ROOT/usr/lib/gpu-double/bin/gpu-double"
install -m 0644 "$HERE/units/gpu-double-driver.service" "$ROOT/etc/systemd/system/gpu-double-driver.service"
ln -sf ../gpu-double-driver.service "$ROOT/etc/systemd/system/sysinit.target.wants/gpu-double-driver.service"
ln -sf /usr/lib/gpu-double/bin/gpu-double "$ROOT/usr/local/sbin/modprobe"
# modinfo for nvidia_peermem (others go to kmod), systemd-detect-virt (bare metal unless fault virtual-machine): in
# /usr/local/sbin, ahead of the real ones in PATH
ln -sf /usr/lib/gpu-double/bin/gpu-double "$ROOT/usr/local/sbin/modinfo"
ln -sf /usr/lib/gpu-double/bin/gpu-double "$ROOT/usr/local/sbin/systemd-detect-virt"
install -m 0755 "$HERE/early/50-gpu-double-sysfs" "$ROOT/etc/testbed/early-mounts.d/50-gpu-double-sysfs"

# the running kernel, as the distro kernel package would have left it
[ -f "$ROOT/lib/modules/$KREL/modules.dep" ] || : > "$ROOT/lib/modules/$KREL/modules.dep"
[ -f "$ROOT/lib/modules/$KREL/modules.order" ] || : > "$ROOT/lib/modules/$KREL/modules.order"
[ -f "$ROOT/boot/vmlinuz-$KREL" ] || echo "testbed kernel image $KREL (the host kernel runs)" > "$ROOT/boot/vmlinuz-$KREL"
[ -f "$ROOT/boot/config-$KREL" ] || echo "# testbed kernel config $KREL" > "$ROOT/boot/config-$KREL"
[ -f "$ROOT/lib/modules/$KREL/vmlinuz" ] || cp "$ROOT/boot/vmlinuz-$KREL" "$ROOT/lib/modules/$KREL/vmlinuz"

tool() {  # tool NAME DEST: link a shim unless a real (non-testbed) tool is there
    if [ -e "$ROOT$2" ] && [ ! -L "$ROOT$2" ]; then
        return 0
    fi
    install -d "$ROOT$(dirname "$2")"
    ln -sf /usr/lib/gpu-double/bin/gpu-double "$ROOT$2"
}

tool mokutil /usr/bin/mokutil

if [ $el = yes ]; then
    tool grubby /usr/sbin/grubby
    tool dracut /usr/bin/dracut
    install -d "$ROOT/boot/loader/entries" "$ROOT/boot/grub2" "$ROOT/etc/sysconfig"
    [ -f "$ROOT/etc/sysconfig/kernel" ] || printf 'UPDATEDEFAULT=yes\nDEFAULTKERNEL=kernel-core\n' > "$ROOT/etc/sysconfig/kernel"
    [ -s "$ROOT/etc/machine-id" ] || echo "$ROOT" | md5sum | cut -c1-32 > "$ROOT/etc/machine-id"
    GPU_DOUBLE_ROOT=$ROOT GPU_DOUBLE_LIB=$HERE/lib GPU_DOUBLE_UNAME_R=$KREL \
        python3 -sS "$HERE/bin/gpu-double" testbed-kernel-install add "$KREL" >/dev/null
    # the image was made before any blacklist: roles must rebuild it
else
    tool update-grub /usr/sbin/update-grub
    tool grub-editenv /usr/bin/grub-editenv
    tool grub-set-default /usr/sbin/grub-set-default
    tool grub-reboot /usr/sbin/grub-reboot
    tool update-initramfs /usr/sbin/update-initramfs
    install -d "$ROOT/boot/grub" "$ROOT/etc/default"
    [ -f "$ROOT/etc/default/grub" ] || printf 'GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n' > "$ROOT/etc/default/grub"
    GPU_DOUBLE_ROOT=$ROOT GPU_DOUBLE_LIB=$HERE/lib GPU_DOUBLE_UNAME_R=$KREL \
        python3 -sS "$HERE/bin/gpu-double" testbed-kernel-install add "$KREL" 2>/dev/null
fi
echo "install_base.sh: $ROOT ready (profile $(basename "$PROFILE"), kernel $KREL, el=$el)"
